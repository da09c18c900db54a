package verify

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

// catalogueFiles returns the .hcl and .lua of a catalogue plugin, the .hcl passed through
// edit.
func catalogueFiles(t *testing.T, kind, name string, edit func(string) string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, ext := range []string{".hcl", ".lua"} {
		b, err := os.ReadFile(filepath.Join(catalogueDir, kind, name+ext))
		if err != nil {
			t.Fatal(err)
		}
		files[name+ext] = string(b)
	}
	files[name+".hcl"] = edit(files[name+".hcl"])
	return files
}

var precisionBlock = regexp.MustCompile(`(?s)\n    precision \{.*?\n    \}`)

// A limiter on a millisecond clock breaks the limit, retry-after and reset-after by under
// its tick when judged to the microsecond, and holds them once it declares the tick.
func TestResolutionJudgesATickEitherWay(t *testing.T) {
	t.Parallel()
	for _, declared := range []bool{false, true} {
		files := catalogueFiles(t, "correct", "ms_log", func(s string) string {
			if !declared {
				return precisionBlock.ReplaceAllString(s, "")
			}
			return s
		})
		if !declared && strings.Contains(files["ms_log.hcl"], "resolution") {
			t.Fatal("the resolution was not taken out")
		}
		f, err := Check(parse(t, files), WithBudget(3000))
		if err != nil {
			t.Fatal(err)
		}
		r := find(t, f, "ms_log", "per_key", PropLimit)
		switch {
		case declared && r.Status != Pass:
			t.Errorf("with resolution 1ms: limit %s %s", r.Status, r.Detail)
		case declared && !strings.Contains(r.Statement, "shorter than 9.999s") || declared && !strings.Contains(r.Statement, "clock resolution of 1ms"):
			t.Errorf("with resolution 1ms the statement does not say it: %s", r.Statement)
		case !declared && (r.Status != Fail || !strings.Contains(r.Detail, "allowed within 9.99")):
			t.Errorf("without a resolution: limit %s %s, want a breach by under a tick of the 10s window", r.Status, r.Detail)
		}
		if declared {
			for _, prop := range []string{PropRetryAfter, PropResetAfter, PropDenials, PropExpiry} {
				if r := find(t, f, "ms_log", "per_key", prop); r.Status != Pass {
					t.Errorf("with resolution 1ms: %s %s %s", prop, r.Status, r.Detail)
				}
			}
		}
	}
}

// A further guarantee is checked: the month of multi_period, taken out, hides the month of
// a day that multi_period_month keeps; kept in, it is what fails.
func TestFurtherStatementsAreChecked(t *testing.T) {
	t.Parallel()
	month := regexp.MustCompile(`(?s)\n  guarantee "window" \{\n    amount = param.per_month.*?\n  \}`)
	for _, kept := range []bool{false, true} {
		files := catalogueFiles(t, "buggy", "multi_period_month", func(s string) string {
			if !kept {
				return month.ReplaceAllString(s, "")
			}
			return s
		})
		f, err := Check(parse(t, files))
		if err != nil {
			t.Fatal(err)
		}
		r := find(t, f, "multi_period", "per_key", PropLimit)
		switch {
		case kept && (r.Status != Fail || !strings.Contains(r.Detail, "(less than the 720h window) against a limit of 6")):
			t.Errorf("with the month's statement: limit %s %s, want the month broken", r.Status, r.Detail)
		case !kept && r.Status == Fail:
			t.Errorf("without the month's statement: limit %s %s, want the minute's alone to hold", r.Status, r.Detail)
		}
	}
}

// max_cost bounds verify's traffic: a script written for one request at a time, which
// raises on a larger cost, passes errors with max_cost = 1 and fails it without.
func TestMaxCostBoundsTraffic(t *testing.T) {
	t.Parallel()
	const lua = `params = {'pos', 'pos'}
function check(key, now, cost, p)
  if cost > 1 then
    error('one request at a time')
  end
  local n = tonumber(call('GET', key)) or 0
  if n + cost > p[1] then
    return 0, p[1] - n, -1, 0, p[1]
  end
  return 1, p[1] - n - cost, 0, 0, p[1], {n + cost}
end
function commit(key, w)
  call('SET', key, w[1])
end`
	for _, bounded := range []bool{false, true} {
		maxCost := ""
		if bounded {
			maxCost = "max_cost = 1\n"
		}
		cfg := parse(t, map[string]string{
			"p.hcl": `algorithm "one" {
  source   = "p.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["GET", "SET"]
  ` + maxCost + `
  guarantee "none" {}
}
policy "p" {
  rule "r" {
    algorithm = "one"
    key       = "k"
    limit     = 3
    window    = "10s"
  }
}`,
			"p.lua": lua,
		})
		f, err := Check(cfg, WithBudget(testBudget))
		if err != nil {
			t.Fatal(err)
		}
		r := find(t, f, "p", "r", PropErrors)
		switch {
		case bounded && r.Status != Pass:
			t.Errorf("max_cost = 1: errors %s %s, want no cost above 1 sent", r.Status, r.Detail)
		case !bounded && (r.Status != Fail || !strings.Contains(r.Detail, "one request at a time")):
			t.Errorf("no max_cost: errors %s %s, want costs above 1 sent and the error found", r.Status, r.Detail)
		}
	}
}

// A whole parameter may be 0: a GCRA whose burst of 0 (beyond the one cell every request
// needs) it takes as "no burst" loads, runs and holds its guarantee; -1 is refused, and a
// Lua that declares it 'pos' does not match.
func TestWholeParameterTakesZero(t *testing.T) {
	t.Parallel()
	testExtraParameter(t, "whole", "0", []struct{ burst, luaKind, want string }{
		{"-1", "nat", "at least 0"},
		{"0", "pos", "'nat'"},
	})
}

// A parameter of kind flag is written true or false (or a request's condition) and
// reaches the Lua as 1 or 0; anything else is refused.
func TestFlagParameter(t *testing.T) {
	t.Parallel()
	testExtraParameter(t, "flag", "true", []struct{ burst, luaKind, want string }{
		{"1", "nat", "A bool is required here, not 1"},
		{`"yes"`, "nat", "A bool is required here"},
		{"false", "pos", "'nat'"},
	})
	testExtraParameter(t, "flag", "false", nil)
	cfg := parse(t, map[string]string{"p.hcl": `algorithm "spaced" {
  source   = "p.lua"
  params   = { rate = "rate", extra = "flag" }
  commands = ["GET"]
  guarantee "rate" {
    burst = 1 + param.extra
    rate  = param.rate
  }
}
policy "p" {
  rule "r" {
    algorithm = "spaced"
    key       = "k"
    rate      = "1/s"
    extra     = request.plan == "pro"
  }
}`, "p.lua": `params = {'pos', 'pos', 'nat'}
function check(key, now, cost, p)
  return 1, p[3], 0, 0, 1 + p[3]
end
function commit(key, w) end`})
	r := cfg.Policies[0].Rules[0]
	for plan, want := range map[string]int64{"pro": 1, "free": 0} {
		w, err := r.Wire(engine.Attrs{"plan": plan})
		if err != nil || w[2] != want {
			t.Errorf("plan %s: wire %v %v, want extra = %d", plan, w, err, want)
		}
	}
	if got := r.Algorithm.DescribeParams([]int64{1, 1000000, 1}); got != "rate=1/s extra=true" {
		t.Errorf("DescribeParams: %q", got)
	}
}

// testExtraParameter checks the spaced plugin, whose burst is 1 + extra (a parameter of
// kind), with extra = good under verify, and each of bad refused by validation.
func testExtraParameter(t *testing.T, kind, good string, bad []struct{ burst, luaKind, want string }) {
	hcl := func(burst, luaKind string) map[string]string {
		return map[string]string{
			"p.hcl": `algorithm "spaced" {
  source   = "p.lua"
  params   = { rate = "rate", extra = "` + kind + `" }
  commands = ["GET", "SET", "PEXPIRE"]
  guarantee "rate" {
    burst = 1 + param.extra
    rate  = param.rate
  }
}
policy "p" {
  rule "r" {
    algorithm = "spaced"
    key       = "k"
    rate      = "1/s"
    extra     = ` + burst + `
  }
}`,
			"p.lua": `params = {'pos', 'pos', '` + luaKind + `'}
function validate(p)
  if p[2] % p[1] ~= 0 then
    return 'the period must be a multiple of the amount'
  end
end
function check(key, now, cost, p)
  local t = idiv(p[2], p[1])
  local span = (1 + p[3]) * t
  local tat = tonumber(call('GET', key)) or now
  if tat < now then
    tat = now
  end
  local left = nonneg(idiv(span - (tat - now), t))
  if cost > 1 + p[3] then
    return 0, left, -1, tat - now, 1 + p[3]
  end
  local tat2 = tat + cost * t
  if tat2 - now > span then
    return 0, left, tat2 - span - now, tat - now, 1 + p[3]
  end
  return 1, idiv(span - (tat2 - now), t), 0, tat2 - now, 1 + p[3], {tat2, tat2 - now}
end
function commit(key, w)
  call('SET', key, w[1])
  expire_us(key, w[2])
end`,
		}
	}
	f, err := Check(parse(t, hcl(good, "nat")), WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Results {
		if r.Status == Fail {
			t.Errorf("extra = %s: %s %s %s", good, r.Property, r.Status, r.Detail)
		}
	}
	for _, bad := range bad {
		files := map[string][]byte{}
		for k, v := range hcl(bad.burst, bad.luaKind) {
			files[k] = []byte(v)
		}
		_, diags := dsl.Parse(files)
		var text strings.Builder
		for _, d := range diags.Errs() {
			text.WriteString(d.Error() + "\n")
		}
		if !diags.HasErrors() || !strings.Contains(text.String(), bad.want) {
			t.Errorf("extra = %s with Lua kind %s:\n%s\nwant an error saying %q", bad.burst, bad.luaKind, text.String(), bad.want)
		}
	}
}
