package httplimit_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
)

// FuzzHeaders: whatever a decision holds (names with any bytes, limits and durations up to
// the int64 range, Never, shadow rules), the fields written are valid RFC 9651 Lists that
// the strict parser reads back to the decision's values, shadow rules never appear, and
// Retry-After is present exactly on a refusal that can pass and is never earlier than t.
func FuzzHeaders(f *testing.F) {
	f.Add("api", "per_user", int64(100), int64(42), int64(0), int64(17e9), int64(60e9), true, false, int64(5), false)
	f.Add("api", "per_ip", int64(10), int64(0), int64(1500e6), int64(1500e6), int64(1e9), false, false, int64(3), true)
	f.Add("p", "never", int64(5), int64(5), int64(-1), int64(0), int64(0), false, false, int64(1), false)
	f.Add("we\"ird\\", "ru\x00le\xff", int64(1<<53), int64(1<<53), int64(1<<62), int64(1<<62), int64(1<<62), false, true, int64(0), true)
	f.Fuzz(func(t *testing.T, policy, rule string, limit, remaining, retry, reset, window int64, allowed, shadow bool, limit2 int64, all bool) {
		a := engine.RuleResult{
			Policy: policy, Rule: rule, Algorithm: "gcra", Shadow: shadow, Allowed: allowed,
			Limit: limit, Remaining: remaining, RetryAfter: time.Duration(retry),
			ResetAfter: time.Duration(reset), Window: time.Duration(window), Key: "k1",
		}
		if allowed {
			a.RetryAfter = 0
		} else if a.RetryAfter < 0 {
			a.RetryAfter = engine.Never
		}
		// A second rule that allowed, closer to exhaustion or not.
		b := engine.RuleResult{
			Policy: "q", Rule: "other", Algorithm: "concurrency", Allowed: true,
			Limit: limit2, Remaining: limit2 / 2, ResetAfter: time.Minute, Key: "k2",
		}
		d := &engine.Decision{Allowed: allowed || shadow, Rules: []engine.RuleResult{a, b}, Decider: -1}
		if !d.Allowed {
			d.Decider, d.RetryAfter = 0, a.RetryAfter
		}
		var opts []httplimit.Option
		if all {
			opts = append(opts, httplimit.WithAllRules())
		}
		h := http.Header{}
		ra := httplimit.SetHeaders(h, d, opts...)

		name := func(rr engine.RuleResult) string {
			var s strings.Builder
			for _, c := range []byte(rr.Policy + "." + rr.Rule) {
				if c < 0x20 || c > 0x7e {
					c = '?'
				}
				s.WriteByte(c)
			}
			return s.String()
		}
		var shown []engine.RuleResult
		for _, rr := range d.Rules {
			if !rr.Shadow && rr.Limit > 0 {
				shown = append(shown, rr)
			}
		}
		if len(shown) == 0 {
			if h.Get("RateLimit-Policy") != "" || h.Get("RateLimit") != "" {
				t.Fatalf("fields without a counted rule: %v", h)
			}
		} else {
			pols := parsePolicies(t, h)
			if len(pols) != len(shown) {
				t.Fatalf("%d policy items, want %d: %v", len(pols), len(shown), h)
			}
			for i, p := range pols {
				rr := shown[i]
				if p.name != name(rr) || p.q != min(rr.Limit, 999_999_999_999_999) {
					t.Fatalf("item %+v for rule %+v", p, rr)
				}
			}
			maxT := int64(-1)
			var lims []limitItem
			counted := false // a counted rule refused the request
			for _, rr := range shown {
				counted = counted || !rr.Allowed
			}
			if h.Get("RateLimit") != "" || all || d.Allowed || counted {
				// Absent only on a refusal by no counted rule (a backend down), where
				// RateLimit shows nothing by default.
				lims = parseLimits(t, h)
			}
			for _, l := range lims {
				var rr *engine.RuleResult
				for i := range shown {
					if name(shown[i]) == l.name {
						rr = &shown[i]
					}
				}
				if rr == nil {
					t.Fatalf("RateLimit item %q names no rule", l.name)
				}
				if l.r != min(max(rr.Remaining, 0), 999_999_999_999_999) {
					t.Fatalf("r=%d for rule %+v", l.r, rr)
				}
				maxT = max(maxT, l.t)
			}
			if ra >= 0 && ra < maxT {
				t.Fatalf("Retry-After %d earlier than t=%d: %v", ra, maxT, h)
			}
			if shadow {
				// Every item is a counted rule's (above); the shadow rule adds none, even
				// one named as a counted rule is, or within one's name ("." in "q.other").
				want := 0
				for _, rr := range shown {
					if name(rr) == name(a) {
						want++
					}
				}
				np, nl := 0, 0
				for _, p := range pols {
					if p.name == name(a) {
						np++
					}
				}
				for _, l := range lims {
					if l.name == name(a) {
						nl++
					}
				}
				if np > want || nl > want {
					t.Fatalf("a shadow rule in the fields: %v", h)
				}
			}
		}
		wantRA := !d.Allowed && d.RetryAfter != engine.Never
		if got := h.Get("Retry-After") != ""; got != wantRA || got != (ra >= 0) {
			t.Fatalf("Retry-After %q (returned %d), want one: %v", h.Get("Retry-After"), ra, wantRA)
		}
		if wantRA && ra < int64((d.RetryAfter+time.Second-1)/time.Second) && ra != 999_999_999_999_999 {
			t.Fatalf("Retry-After %d earlier than the retry-after %v", ra, d.RetryAfter)
		}
	})
}
