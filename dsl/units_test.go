package dsl

import (
	"strings"
	"testing"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		us   int64
		err  string // a substring of the error; "" for success
		form bool   // the error is about the form, so the accepted forms help
	}{
		{in: "1ms", us: 1_000},
		{in: "250ms", us: 250_000},
		{in: "1s", us: 1_000_000},
		{in: "1m", us: 60_000_000},
		{in: "1h", us: 3_600_000_000},
		{in: "1d", us: 86_400_000_000},
		{in: "1m30s", us: 90_000_000},
		{in: "1d2h3m4s5ms", us: 93_784_005_000},
		{in: "1000us", us: 1_000},
		{in: "1500µs", us: 1_500},
		{in: "", err: "empty", form: true},
		{in: "1", err: "no unit", form: true},
		{in: "s", err: "does not start with a number", form: true},
		{in: "1.5s", err: `write "1s500ms" instead`, form: true},
		{in: "0.5ms", err: "whole numbers", form: true},
		{in: "1 s", err: "spaces", form: true},
		{in: " 1s", err: "spaces", form: true},
		{in: "1sec", err: `unknown unit "sec"`, form: true},
		{in: "1mn", err: `Did you mean`, form: true},
		{in: "1s1m", err: "smaller unit first", form: true},
		{in: "1m1m", err: "repeats", form: true},
		{in: "-1s", err: "negative"},
		{in: "0s", err: "zero"},
		{in: "500us", err: "below 1ms"},
		{in: "999µs", err: "clock resolution"},
		{in: "9223372036854775807d", err: "too long"},
		{in: "99999999999999999999s", err: "too long"},
		{in: "104249991d", err: "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			us, err := parseDuration(tt.in)
			if tt.err == "" {
				if err != nil || us != tt.us {
					t.Fatalf("parseDuration(%q) = %d, %v; want %d", tt.in, us, err, tt.us)
				}
				if back, err := parseDuration(formatDuration(us)); err != nil || back != us {
					t.Errorf("formatDuration(%d) = %q does not read back: %d, %v", us, formatDuration(us), back, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("parseDuration(%q) = %d, %v; want an error containing %q", tt.in, us, err, tt.err)
			}
			if ue := err.(*unitError); ue.forms != tt.form {
				t.Errorf("forms = %v, want %v", ue.forms, tt.form)
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in          string
		amount, per int64
		err         string
	}{
		{in: "10/s", amount: 1, per: 100_000},
		{in: "1/s", amount: 1, per: 1_000_000},
		{in: "600/m", amount: 1, per: 100_000},
		{in: "7/m", amount: 7, per: 60_000_000},
		{in: "5/250ms", amount: 1, per: 50_000},
		{in: "1000/1h", amount: 1, per: 3_600_000},
		{in: "7/1h", amount: 7, per: 3_600_000_000},
		{in: "3/1d", amount: 1, per: 28_800_000_000},
		{in: "1/1m30s", amount: 1, per: 90_000_000},
		{in: "1000000/s", amount: 1, per: 1},
		{in: "3/7ms", amount: 3, per: 7_000},
		{in: "10", err: "no slash"},
		{in: "1m", err: "is a duration, not a rate"},
		{in: "/s", err: "no amount"},
		{in: "10/", err: "no period"},
		{in: "10/sec", err: `unknown unit "sec". Did you mean "s"?`},
		{in: "0/s", err: "zero"},
		{in: "-1/s", err: "negative"},
		{in: "1.5/s", err: "not a whole number"},
		{in: "x/s", err: "not a whole number"},
		{in: "10 / s", err: "spaces"},
		{in: "5/100us", err: "below 1ms"},
		{in: "5/0s", err: "below 1ms"},
		{in: "9007199254740993/s", err: "above 2^53"},
		{in: "99999999999999999999/s", err: "above 2^53"},
		{in: "1/s/s", err: `unknown unit "s/s"`},
		{in: "1/2s/s", err: "not a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, per, err := parseRate(tt.in)
			if tt.err == "" {
				if err != nil || n != tt.amount || per != tt.per {
					t.Fatalf("parseRate(%q) = %d/%dµs, %v; want %d/%dµs", tt.in, n, per, err, tt.amount, tt.per)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("parseRate(%q) = %d/%d, %v; want an error containing %q", tt.in, n, per, err, tt.err)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	for us, want := range map[int64]string{
		1_000:          "1ms",
		1_500_000:      "1s500ms",
		90_000_000:     "1m30s",
		86_400_000_000: "1d",
		1_001:          "1ms1us",
	} {
		if got := formatDuration(us); got != want {
			t.Errorf("formatDuration(%d) = %q, want %q", us, got, want)
		}
	}
}
