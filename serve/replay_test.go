package serve

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/redis/go-redis/v9"
	"github.com/rogpeppe/go-internal/txtar"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/envoyconf"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// The replay: envoyproxy/ratelimit's own tests ("the peer"), re-expressed in our own
// words as request sequences in testdata/replay/*.txtar, one archive per group of the
// peer's tests. Each case is imported with rlctl's translation (importEnvoy) and sent
// over gRPC to a Server, on the embedded backend and on a real redis-server, at virtual
// times. Every step must answer as the peer's test asserts, or its disagreement must be
// listed in knownDiffs with a reason.
//
// An archive holds YAML configurations (NAME.yaml) and cases (NAME.case). A case is lines
// ("#" starts a comment):
//
//	from: <peer test file> <test function> [sub-case]
//	config: a.yaml [b.yaml ...]        the peer's configuration files, in load order
//	settings: name[=value] ...         the peer settings its test used (knownSettings)
//	load: error [substring]            the peer refuses the configuration (no steps)
//	reload: a.yaml ... [-> error [s]]  the files change; the peer reloads (or refuses)
//	call @T DOMAIN [hits=N]            a ShouldRateLimit at T seconds after replayEpoch
//	                                   (T never decreases within a case);
//	prep @T DOMAIN [hits=N]            the same, for a step the peer's test does not
//	                                   assert (setting up the state its mocks assume, or
//	                                   showing what it asserts in another form): its
//	                                   answer is derived from the peer's code
//	  desc k=v ... [; hits=N] [; limit=N/unit]   a descriptor: entries, hits_addend,
//	                                   limit override ("" is written "", k= is an empty value)
//	want OK|OVER_LIMIT                 the peer's overall code, then per descriptor:
//	  st CODE none|N/unit [remaining=N] [reset=S|?] [name=S]
//	                                   its code and current limit (none: no limit), and,
//	                                   when stated, what remains, the seconds until the
//	                                   reset (?: present, whole, positive) and the limit's
//	                                   name; statuses may be left out when the test checks
//	                                   only the overall code
//	  header Name: value               a response header the peer adds (all are compared
//	                                   when any is stated; none is expected unless the
//	                                   case has response_headers)
//	  stat ...                         a statistic the peer's test asserts (its key and
//	                                   value, or what the call adds): recorded, not
//	                                   checked yet
//	want error [substring]             a gRPC error, its message holding the substring
//	                                   (rlctl's wording)

// importEnvoy is the one call of the import under test: the configuration files of a
// case, in order, to one rlctl policy file (what rlctl import writes).
func importEnvoy(files []envoyconf.File, opts envoyconf.Options) ([]byte, error) {
	return envoyconf.Import(files, opts)
}

// replayEpoch is the virtual time 0 of every case: a Unix time that is a whole number of
// each of the peer's units (a second, minute, hour, day, week, its 30-day month and its
// 365-day year: 2 * 1,324,512,000 s, in 2053), so a step at offset t is at t modulo every
// window, as the peer's tests' clocks (Unix times such as 1234 or 1000000) are.
var replayEpoch = time.Unix(2*1_324_512_000, 0).UTC()

// A knownDiff excuses the disagreements of the steps at "archive/case#N" (step N, from 1;
// "#N-M" steps N to M; "#load" the configuration, whose refusal blocks every step; "#rK"
// the K-th reload) in the fields listed (all when empty), on backend ("" both). Its
// reason is design:<id> (rlctl differs on purpose), pending:<feature> (a peer feature
// rlctl does not have yet), bug:<id> (an rlctl bug, reported) or peer-test:<id> (what the
// peer's test asserts is its test's own doing, not what its service answers). An entry that excuses
// nothing is stale and fails the test, so the list stays exact.
type knownDiff struct {
	at      string
	fields  string
	reason  string
	backend string
}

// knownDiffs is the exact list of the replay's disagreements. Fields are overall,
// error, load, reload, headers, statuses, and dN.code, dN.limit, dN.remaining, dN.reset,
// dN.name of descriptor N (from 1).
var knownDiffs = []knownDiff{
	// A denied request charges nothing: the other descriptors of the call keep what they had.
	{"integration_test/basic#38-42", "d1.remaining", "design:all-or-nothing", ""},
	{"integration_test/basic-per-second#38-42", "d1.remaining", "design:all-or-nothing", ""},
	{"integration_test/basic-local-cache#38-42", "d1.remaining", "design:all-or-nothing", ""},
	{"integration_test/basic-per-second-local-cache#38-42", "d1.remaining", "design:all-or-nothing", ""},
	{"integration_test/basic-cache-prefix#38-42", "d1.remaining", "design:all-or-nothing", ""},
	{"scripts/replaces-supported#16", "d1.remaining", "design:all-or-nothing", ""},

	// The peer counted an earlier over-limit call past the limit; rlctl did not, so a call
	// that adds nothing (hits_addend 0) is within it.
	{"fixed_cache_test/redis#10", "d1.code", "design:denied-not-counted", ""},
	{"fixed_cache_test/redis-per-second#10", "d1.code", "design:denied-not-counted", ""},
	{"scripts/token-quota-supported#7", "overall,d1.code", "design:denied-not-counted", ""},

	{"fixed_cache_test/near-limit#14", "d1.remaining", "design:remaining-on-denial", ""},
	{"fixed_cache_test/near-limit#16", "d1.remaining", "design:remaining-on-denial", ""},
	{"fixed_cache_test/stop-increment#4", "d2.remaining", "design:remaining-on-denial", ""},
	{"base_limiter_test/status-over#2", "d1.remaining", "design:remaining-on-denial", ""},
	{"base_limiter_test/status-over-shadow#2", "d1.remaining", "design:remaining-on-denial", ""},

	{"fixed_cache_test/near-limit#18", "d1.reset", "design:never-fits", ""},

	{"config_test/basic-lookups#12-13", "d1.name", "design:limit-name", ""},
	{"service_test/service#3", "d1.name", "design:limit-name", ""},

	{"scripts/token-quota-supported#1", "d1.reset", "design:reset-when-empty", ""},
	{"fixed_cache_test/stop-increment#4", "stat:domain.key4_value4.near_limit", "design:all-or-nothing", ""},
	{"config_test/basic-lookups#14", "stat:test-domain.key6.total_hits", "peer-test:by-hand", ""},
	{"config_test/shadow-mode-config#2", "stat:test-domain.key1_value1.subkey1_subvalue1.shadow_mode", "peer-test:by-hand", ""},
	{"config_test/shadow-mode-config#3", "stat:test-domain.key2.shadow_mode", "peer-test:by-hand", ""},
	{"base_limiter_test/status-below#2", "stat:domain.key_value.within_limit", "peer-test:mock-hits", ""},
	{"base_limiter_test/status-below-shadow#2", "stat:domain.key_value.within_limit", "peer-test:mock-hits", ""},

	{"service_test/metadata-passed#load", "load", "design:no-quota-mode", ""},
	{"service_test/metadata-all-passed#load", "load", "design:no-quota-mode", ""},
	{"service_test/metadata-overlap#load", "load", "design:no-quota-mode", ""},
	{"service_test/per-descriptor-quota#load", "load", "design:no-quota-mode", ""},
	{"service_test/mixed-per-descriptor#load", "load", "design:no-quota-mode", ""},
	{"service_test/mixed-per-descriptor-under#load", "load", "design:no-quota-mode", ""},
	{"service_test/quota-all-over#load", "load", "design:no-quota-mode", ""},
	{"service_test/quota-some-over#load", "load", "design:no-quota-mode", ""},
	{"service_test/quota-shadow#load", "load", "design:no-quota-mode", ""},
	{"service_test/mixed-shadow-quota#load", "load", "design:no-quota-mode", ""},

	// example.yaml's bar=banned (0 a minute) is the first thing the import refuses in it.
	{"examples/example-lookups#load", "load", "design:no-quota-mode", ""},
	{"scripts/multiservice-tokenquota#load", "load", "design:no-quota-mode", ""},
	{"scripts/quota#load", "load", "design:no-quota-mode", ""},
	{"scripts/replaces#load", "load", "design:no-quota-mode", ""},
	{"scripts/simple-get#load", "load", "design:no-quota-mode", ""},
	{"scripts/token-quota#load", "load", "design:no-quota-mode", ""},
	{"scripts/trigger-ratelimit#load", "load", "design:no-quota-mode", ""},
	{"scripts/trigger-shadow-mode-key#load", "load", "design:no-quota-mode", ""},
	{"scripts/value-included-in-stats-key#load", "load", "design:no-quota-mode", ""},
}

// reasonText explains each reason once (logged with its count).
var reasonText = map[string]string{
	"design:all-or-nothing":      "rlctl charges a call's descriptors together or none: when one is over, the others are not charged (the peer charges each)",
	"design:denied-not-counted":  "rlctl does not count a denied call; the peer's counter goes on past the limit, so its later calls that add nothing find it over",
	"design:remaining-on-denial": "an OVER_LIMIT status says what remains for a call that fits (the denied call charged nothing); the peer says 0",
	"design:never-fits":          "a call costing more than the whole limit never passes: rlctl gives it no duration_until_reset",
	"design:limit-name":          "current_limit.name is rlctl's policy.rule, not the rate_limit's name",
	"design:reset-when-empty":    "duration_until_reset is how long until the counter is empty again (the RateLimit field's reset); a call that adds nothing to an unused counter gets 0s, the peer the window's end",
	"peer-test:by-hand":          "the peer's config test increments the statistic itself, on the limit its lookup returns (an unlimited one; shadow_mode within the limit): its service counts nothing there",
	"peer-test:mock-hits":        "the peer's unit test gives a count that rises by 4 with hits_addend 1, and counts 1 within the limit; its service, for the 4 hits the count says, counts 4, as rlctl does",
	"design:no-quota-mode":       "quota_mode (a request passes when any of its quota descriptors has room): decided against, the import refuses it",
}

// TestEnvoyReplay replays the peer's test cases on both backends; see the top of this
// file.
func TestEnvoyReplay(t *testing.T) {
	cases := loadReplayCases(t)
	results := map[string]*replayTally{}
	for _, backend := range []string{"embedded", "redis"} {
		t.Run(backend, func(t *testing.T) {
			var rdb *redis.Client
			if backend == "redis" {
				rdb = redistest.Shared(t).Client(t)
			}
			tally := &replayTally{backend: backend, byReason: map[string]map[string]bool{}}
			results[backend] = tally
			for _, c := range cases {
				diffs := runReplayCase(t, c, backend, rdb)
				tally.add(c, diffs)
			}
			tally.report(t)
		})
	}
	checkStale(t, results)
	logArchives(t, cases)
}

// logArchives logs, per archive (per group of the peer's tests), its sequences and steps.
func logArchives(t *testing.T, cases []*replayCase) {
	t.Helper()
	type count struct{ sequences, steps, preps, stats int }
	counts := map[string]*count{}
	var order []string
	for _, c := range cases {
		n := counts[c.archive]
		if n == nil {
			n = &count{}
			counts[c.archive] = n
			order = append(order, c.archive)
		}
		n.sequences++
		n.steps += c.steps
		n.preps += c.preps
		n.stats += c.stats
	}
	for _, a := range order {
		n := counts[a]
		t.Logf("%-24s %3d sequences, %3d steps (%d of them prep), %3d statistics", a+".txtar", n.sequences, n.steps, n.preps, n.stats)
	}
}

// replayCase is one sequence of a case archive.
type replayCase struct {
	archive, name string
	from          string
	configs       []string
	settings      map[string]string
	load          *string // the peer refuses the configuration: a substring of rlctl's error ("" any)
	items         []replayItem
	files         map[string][]byte // the archive's files
	steps, preps  int
	stats         int // stat lines: the peer's statistics
	unchecked     int // of them, those not of a limit (replayStat): recorded, not checked
}

func (c *replayCase) id() string { return c.archive + "/" + c.name }

type replayItem struct {
	reload *replayReload
	step   *replayStep
}

type replayReload struct {
	k       int
	configs []string
	err     *string
}

type replayStep struct {
	n, line  int
	prep     bool
	at       int64
	domain   string
	hits     uint32
	descs    []*ratelimitv3.RateLimitDescriptor
	wantErr  *string
	want     string // OK, OVER_LIMIT
	statuses []replayStatus
	headers  []string // "Name: value"
	stats    []replayStat
}

// replayStat is one of a limit's statistics that the peer's test asserts after a step:
// its value, or (delta) what the step adds to it. The limit is named by its stats key
// (domain and descriptor, as the import's stats_key names it) and counted in rlctl's
// EnvoyStats under that name's labels.
type replayStat struct {
	key, family string
	delta       bool
	n           uint64
}

// statFamilies are the families of EnvoyStats by name, as statsFamilies orders them.
var statFamilies = map[string]int{"total_hits": 0, "within_limit": 1, "near_limit": 2, "over_limit": 3, "shadow_mode": 4}

// parseReplayStat reads a stat line: "NAME.FAMILY [+]N" (with or without the peer's
// "ratelimit.service.rate_limit." prefix) or "NAME FAMILY+N ...". Lines of other
// statistics (the local cache's, config loads, errors, a family rlctl does not count)
// give none and are not checked.
func parseReplayStat(rest string) ([]replayStat, error) {
	f := strings.Fields(rest)
	if len(f) < 2 {
		return nil, fmt.Errorf("stat %q: a name and a value", rest)
	}
	var out []replayStat
	if fam, n, ok := strings.Cut(f[1], "+"); ok && fam != "" {
		for _, x := range f[1:] {
			fam, n, ok = strings.Cut(x, "+")
			v, err := strconv.ParseUint(n, 10, 64)
			if !ok || err != nil {
				return nil, fmt.Errorf("stat %q: %q is not FAMILY+N", rest, x)
			}
			if _, known := statFamilies[fam]; known {
				out = append(out, replayStat{key: f[0], family: fam, delta: true, n: v})
			}
		}
		return out, nil
	}
	if len(f) != 2 {
		return nil, nil // another statistic's form
	}
	name := strings.TrimPrefix(f[0], "ratelimit.service.rate_limit.")
	i := strings.LastIndex(name, ".")
	if i < 0 {
		return nil, nil
	}
	fam := name[i+1:]
	if _, known := statFamilies[fam]; !known {
		return nil, nil
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(f[1], "+"), 10, 64)
	if err != nil {
		return nil, nil // another statistic's form
	}
	return []replayStat{{key: name[:i], family: fam, delta: strings.HasPrefix(f[1], "+"), n: v}}, nil
}

type replayLimit struct {
	rpu  uint32
	unit rlsv3.RateLimitResponse_RateLimit_Unit
}

func (l *replayLimit) String() string {
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("%d/%s", l.rpu, strings.ToLower(l.unit.String()))
}

type replayStatus struct {
	code      string
	limit     *replayLimit
	remaining *uint32
	reset     *int64 // -1: present, positive and whole seconds, whatever its value
	name      *string
}

// replayDiff is one field of one step that rlctl answers differently.
type replayDiff struct {
	at, field, want, got string
}

func (d replayDiff) String() string {
	return fmt.Sprintf("%s %s: peer %s, rlctl %s", d.at, d.field, d.want, d.got)
}

// loadReplayCases reads every case archive.
func loadReplayCases(t *testing.T) []*replayCase {
	t.Helper()
	paths, err := filepath.Glob("testdata/replay/*.txtar")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no case archives in testdata/replay: %v", err)
	}
	var cases []*replayCase
	for _, p := range paths {
		a, err := txtar.ParseFile(p)
		if err != nil {
			t.Fatal(err)
		}
		archive := strings.TrimSuffix(filepath.Base(p), ".txtar")
		files := map[string][]byte{}
		for _, f := range a.Files {
			if _, dup := files[f.Name]; dup {
				t.Fatalf("%s: %s twice", p, f.Name)
			}
			files[f.Name] = f.Data
		}
		n := 0
		for _, f := range a.Files {
			name, ok := strings.CutSuffix(f.Name, ".case")
			if !ok {
				continue
			}
			c, err := parseReplayCase(archive, name, f.Data, files)
			if err != nil {
				t.Fatalf("%s: %s: %v", p, f.Name, err)
			}
			cases = append(cases, c)
			n++
		}
		if n == 0 {
			t.Fatalf("%s: no .case files", p)
		}
	}
	return cases
}

var replayUnits = map[string]rlsv3.RateLimitResponse_RateLimit_Unit{
	"second": rlsv3.RateLimitResponse_RateLimit_SECOND, "minute": rlsv3.RateLimitResponse_RateLimit_MINUTE,
	"hour": rlsv3.RateLimitResponse_RateLimit_HOUR, "day": rlsv3.RateLimitResponse_RateLimit_DAY,
	"week": rlsv3.RateLimitResponse_RateLimit_WEEK, "month": rlsv3.RateLimitResponse_RateLimit_MONTH,
	"year": rlsv3.RateLimitResponse_RateLimit_YEAR,
}

func parseReplayLimit(s string) (*replayLimit, error) {
	n, u, ok := strings.Cut(s, "/")
	unit, known := replayUnits[u]
	rpu, err := strconv.ParseUint(n, 10, 32)
	if !ok || !known || err != nil {
		return nil, fmt.Errorf("limit %q is not N/unit", s)
	}
	return &replayLimit{rpu: uint32(rpu), unit: unit}, nil
}

// knownSettings are the peer settings a case may state. Only merge_domains and
// response_headers change how the harness runs rlctl; the others are recorded.
var knownSettings = map[string]bool{
	"merge_domains": true, "shadow_mode": true, "quota_mode": true, "response_headers": true,
	"near_limit_ratio": true, "stop_increment": true, "local_cache": true, "per_second_redis": true,
	"cache_prefix": true, "expiration_jitter": true, "dynamic_metadata": true, "backend": true,
	"redis_auth": true, "redis_tls": true,
}

func parseReplayCase(archive, name string, src []byte, files map[string][]byte) (*replayCase, error) {
	c := &replayCase{archive: archive, name: name, settings: map[string]string{}, files: files}
	var step *replayStep
	var inWant bool
	sc := bufio.NewScanner(strings.NewReader(string(src)))
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.Index(text, " #"); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		word, rest, _ := strings.Cut(text, " ")
		rest = strings.TrimSpace(rest)
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
		}
		switch word {
		case "from:":
			c.from = rest
		case "config:":
			c.configs = strings.Fields(rest)
			for _, f := range c.configs {
				if files[f] == nil {
					return nil, fail("no file %s in the archive", f)
				}
			}
		case "settings:":
			for _, s := range strings.Fields(rest) {
				k, v, _ := strings.Cut(s, "=")
				if !knownSettings[k] {
					return nil, fail("unknown setting %s", k)
				}
				c.settings[k] = v
			}
		case "load:":
			msg, ok := strings.CutPrefix(rest, "error")
			if !ok {
				return nil, fail("load: error [substring]")
			}
			s := strings.TrimSpace(msg)
			c.load = &s
		case "reload:":
			r := &replayReload{k: 1}
			for _, it := range c.items {
				if it.reload != nil {
					r.k++
				}
			}
			files, msg, fails := strings.Cut(rest, "->")
			r.configs = strings.Fields(files)
			if fails {
				s, ok := strings.CutPrefix(strings.TrimSpace(msg), "error")
				if !ok {
					return nil, fail("reload: files -> error [substring]")
				}
				s = strings.TrimSpace(s)
				r.err = &s
			}
			c.items = append(c.items, replayItem{reload: r})
			step, inWant = nil, false
		case "call", "prep":
			f := strings.Fields(rest)
			if len(f) < 2 || !strings.HasPrefix(f[0], "@") {
				return nil, fail("%s @<seconds> <domain> [hits=N]", word)
			}
			at, err := strconv.ParseInt(f[0][1:], 10, 64)
			if err != nil {
				return nil, fail("time %q", f[0])
			}
			c.steps++
			step = &replayStep{n: c.steps, line: line, prep: word == "prep", at: at, domain: f[1]}
			if step.prep {
				c.preps++
			}
			if step.domain == `""` {
				step.domain = ""
			}
			for _, o := range f[2:] {
				h, ok := strings.CutPrefix(o, "hits=")
				n, err := strconv.ParseUint(h, 10, 32)
				if !ok || err != nil {
					return nil, fail("option %q", o)
				}
				step.hits = uint32(n)
			}
			c.items = append(c.items, replayItem{step: step})
			inWant = false
		case "desc":
			if step == nil || inWant {
				return nil, fail("desc outside a call")
			}
			entries, opts, _ := strings.Cut(rest, ";")
			d := &ratelimitv3.RateLimitDescriptor{}
			for _, e := range strings.Fields(entries) {
				k, v, ok := strings.Cut(e, "=")
				if !ok {
					return nil, fail("entry %q is not key=value", e)
				}
				d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
			}
			for _, o := range strings.Fields(strings.ReplaceAll(opts, ";", " ")) {
				k, v, _ := strings.Cut(o, "=")
				switch k {
				case "hits":
					n, err := strconv.ParseUint(v, 10, 64)
					if err != nil {
						return nil, fail("hits %q", v)
					}
					d.HitsAddend = wrapperspb.UInt64(n)
				case "limit":
					l, err := parseReplayLimit(v)
					if err != nil {
						return nil, fail("%v", err)
					}
					d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: l.rpu, Unit: typev3.RateLimitUnit(l.unit)}
				default:
					return nil, fail("descriptor option %q", o)
				}
			}
			step.descs = append(step.descs, d)
		case "want":
			if step == nil || inWant {
				return nil, fail("want outside a call")
			}
			inWant = true
			if msg, ok := strings.CutPrefix(rest, "error"); ok {
				s := strings.TrimSpace(msg)
				step.wantErr = &s
				continue
			}
			if rest != "OK" && rest != "OVER_LIMIT" {
				return nil, fail("want OK, OVER_LIMIT or error")
			}
			step.want = rest
		case "st":
			if !inWant || step.wantErr != nil {
				return nil, fail("st outside a want")
			}
			f := strings.Fields(rest)
			if len(f) < 2 || f[0] != "OK" && f[0] != "OVER_LIMIT" {
				return nil, fail("st OK|OVER_LIMIT none|N/unit [remaining=N] [reset=N|?] [name=S]")
			}
			s := replayStatus{code: f[0]}
			if f[1] != "none" {
				l, err := parseReplayLimit(f[1])
				if err != nil {
					return nil, fail("%v", err)
				}
				s.limit = l
			}
			for _, o := range f[2:] {
				k, v, _ := strings.Cut(o, "=")
				switch k {
				case "remaining":
					n, err := strconv.ParseUint(v, 10, 32)
					if err != nil {
						return nil, fail("remaining %q", v)
					}
					r := uint32(n)
					s.remaining = &r
				case "reset":
					r := int64(-1)
					if v != "?" {
						n, err := strconv.ParseInt(v, 10, 64)
						if err != nil || n < 0 {
							return nil, fail("reset %q", v)
						}
						r = n
					}
					s.reset = &r
				case "name":
					s.name = &v
				default:
					return nil, fail("status option %q", o)
				}
			}
			step.statuses = append(step.statuses, s)
		case "header":
			if !inWant {
				return nil, fail("header outside a want")
			}
			k, v, ok := strings.Cut(rest, ":")
			if !ok {
				return nil, fail("header Name: value")
			}
			step.headers = append(step.headers, k+": "+strings.TrimSpace(v))
		case "stat":
			if !inWant {
				return nil, fail("stat outside a want")
			}
			c.stats++
			st, err := parseReplayStat(rest)
			if err != nil {
				return nil, fail("%v", err)
			}
			if st == nil {
				c.unchecked++
			}
			step.stats = append(step.stats, st...)
		default:
			return nil, fail("unknown line %q", word)
		}
	}
	switch {
	case c.from == "":
		return nil, fmt.Errorf("no from:")
	case len(c.configs) == 0:
		return nil, fmt.Errorf("no config:")
	case c.load == nil && c.steps == 0:
		return nil, fmt.Errorf("no steps")
	case c.load != nil && c.steps > 0:
		return nil, fmt.Errorf("steps after a configuration the peer refuses")
	}
	last := int64(0)
	for _, it := range c.items {
		s := it.step
		if s == nil {
			continue
		}
		if s.at < last {
			// Client clocks are trusted to move forward: the engine places a Redis call's
			// deadline on the server's clock from what the client's read, and a clock that
			// jumps back days misplaces it (the call fails, as late). The peer's mocked
			// clocks jump; the replay's must not.
			return nil, fmt.Errorf("line %d: the virtual time goes back from @%d to @%d", s.line, last, s.at)
		}
		last = s.at
		if s.want == "" && s.wantErr == nil {
			return nil, fmt.Errorf("line %d: a call without want", s.line)
		}
		if len(s.statuses) > 0 && len(s.statuses) != len(s.descs) {
			return nil, fmt.Errorf("line %d: %d statuses for %d descriptors", s.line, len(s.statuses), len(s.descs))
		}
	}
	return c, nil
}

// replayServer is a Server on one case's policies, at the virtual clock.
type replayServer struct {
	srv   *Server
	stats *EnvoyStats
	dir   string
	clock *luahost.ManualClock
	rls   rlsv3.RateLimitServiceClient
	stop  func()
}

// translate imports configs and writes them, on the client clock, to dir/policy.hcl.
func (c *replayCase) translate(configs []string, dir string) error {
	files := make([]envoyconf.File, len(configs))
	for i, name := range configs {
		files[i] = envoyconf.File{Name: name, Src: c.files[name]}
	}
	_, merge := c.settings["merge_domains"]
	out, err := importEnvoy(files, envoyconf.Options{MergeDomains: merge})
	if err != nil {
		return err
	}
	src := string(out)
	// Every policy counts on the client clock, the test's virtual one, so fixed windows
	// follow it on Redis too.
	if n, m := strings.Count(src, "\npolicy "), strings.Count(src, "\n  match ="); n != m {
		return fmt.Errorf("harness: %d policies but %d match lines to put the clock before:\n%s", n, m, src)
	}
	src = strings.ReplaceAll(src, "\n  match =", "\n  clock = \"client\"\n  match =")
	return os.WriteFile(filepath.Join(dir, "policy.hcl"), []byte(src), 0o644)
}

func (c *replayCase) start(t *testing.T, backend string, rdb *redis.Client) (*replayServer, error) {
	t.Helper()
	s := &replayServer{dir: t.TempDir(), clock: luahost.NewManualClock(replayEpoch)}
	if err := c.translate(c.configs, s.dir); err != nil {
		return nil, err
	}
	var b engine.Backend
	if backend == "redis" {
		if err := rdb.FlushDB(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		b = engine.NewRedis(rdb)
	} else {
		b = engine.NewLocal(luahost.New(luahost.WithClock(s.clock)))
	}
	// AllowRemoval: the peer reloads whatever the files say, dropped limits included.
	srv, err := New(c.config(Config{Paths: []string{s.dir}, Backend: b, Clock: s.clock.Now, AllowRemoval: true, pause: func() {},
		Engine: []engine.Option{engine.WithClock(s.clock.Now), engine.WithTimeout(time.Minute)}}))
	if err != nil {
		return nil, err
	}
	s.srv = srv
	ratio := 0.8 // NEAR_LIMIT_RATIO's default
	if v, ok := c.settings["near_limit_ratio"]; ok && v != "" {
		if ratio, err = strconv.ParseFloat(v, 64); err != nil {
			t.Fatal(err)
		}
	}
	if s.stats, err = NewEnvoyStats(srv, ratio); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(GRPCServerOptions()...)
	srv.RegisterGRPC(g)
	go g.Serve(l)
	conn, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s.rls = rlsv3.NewRateLimitServiceClient(conn)
	s.stop = func() { conn.Close(); g.Stop() }
	return s, nil
}

// config is cfg with the peer settings of c that rlctl has: SHADOW_MODE (ShadowMode) and
// the response headers (none unless LIMIT_RESPONSE_HEADERS_ENABLED, then its three, under
// its default names or those the case gives as limit,remaining,reset).
func (c *replayCase) config(cfg Config) Config {
	_, cfg.ShadowMode = c.settings["shadow_mode"]
	names, on := c.settings["response_headers"]
	if names == "" {
		names = "RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset" // the peer's defaults
	}
	switch n := strings.Split(names, ","); {
	case !on:
		cfg.Headers.Omit = true
	case len(n) == 3:
		cfg.Headers.Legacy = &LegacyHeaders{Limit: n[0], Remaining: n[1], Reset: n[2]}
	}
	return cfg
}

// runReplayCase replays c on backend and returns its disagreements.
func runReplayCase(t *testing.T, c *replayCase, backend string, rdb *redis.Client) []replayDiff {
	t.Helper()
	s, err := c.start(t, backend, rdb)
	switch {
	case c.load != nil && err == nil:
		s.stop()
		return []replayDiff{{at: c.id() + "#load", field: "load", want: "refused (" + *c.load + ")", got: "loaded"}}
	case c.load != nil:
		if !strings.Contains(err.Error(), *c.load) {
			return []replayDiff{{at: c.id() + "#load", field: "load", want: "refused (" + *c.load + ")", got: "refused: " + err.Error()}}
		}
		return nil
	case err != nil:
		return []replayDiff{{at: c.id() + "#load", field: "load", want: "loaded", got: "refused: " + err.Error()}}
	}
	defer s.stop()
	var diffs []replayDiff
	for _, it := range c.items {
		if r := it.reload; r != nil {
			diffs = append(diffs, s.reload(c, r)...)
			continue
		}
		diffs = append(diffs, s.step(c, it.step)...)
	}
	return diffs
}

func (s *replayServer) reload(c *replayCase, r *replayReload) []replayDiff {
	at := fmt.Sprintf("%s#r%d", c.id(), r.k)
	err := c.translate(r.configs, s.dir)
	if err == nil {
		_, err = s.srv.Reload()
	}
	switch {
	case r.err == nil && err != nil:
		return []replayDiff{{at: at, field: "reload", want: "reloaded", got: "refused: " + err.Error()}}
	case r.err != nil && err == nil:
		return []replayDiff{{at: at, field: "reload", want: "refused (" + *r.err + ")", got: "reloaded"}}
	case r.err != nil && !strings.Contains(err.Error(), *r.err):
		return []replayDiff{{at: at, field: "reload", want: "refused (" + *r.err + ")", got: "refused: " + err.Error()}}
	}
	return nil
}

func (s *replayServer) step(c *replayCase, st *replayStep) (diffs []replayDiff) {
	at := fmt.Sprintf("%s#%d", c.id(), st.n)
	diff := func(field string, want, got any) {
		diffs = append(diffs, replayDiff{at: at, field: field, want: fmt.Sprint(want), got: fmt.Sprint(got)})
	}
	s.clock.Set(replayEpoch.Add(time.Duration(st.at) * time.Second))
	before := make([]uint64, len(st.stats))
	for i, x := range st.stats {
		before[i] = s.statValue(x)
	}
	defer func() { // after the answer's fields: into the named result
		for i, x := range st.stats {
			got := s.statValue(x)
			if x.delta {
				got -= before[i]
			}
			if got != x.n {
				diff("stat:"+x.key+"."+x.family, x.n, got)
			}
		}
	}()
	req := &rlsv3.RateLimitRequest{Domain: st.domain, Descriptors: st.descs, HitsAddend: st.hits}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := s.rls.ShouldRateLimit(ctx, req)
	if st.wantErr != nil {
		switch {
		case err == nil:
			diff("error", "error "+*st.wantErr, resp.GetOverallCode())
		case !strings.Contains(status.Convert(err).Message(), *st.wantErr):
			diff("error", "error "+*st.wantErr, err)
		}
		return diffs
	}
	if err != nil {
		diff("error", st.want, err)
		return diffs
	}
	if got := resp.GetOverallCode().String(); got != st.want {
		diff("overall", st.want, got)
	}
	if len(st.statuses) > 0 && len(resp.GetStatuses()) != len(st.statuses) {
		diff("statuses", len(st.statuses), len(resp.GetStatuses()))
		return diffs
	}
	for i, want := range st.statuses {
		got := resp.GetStatuses()[i]
		d := fmt.Sprintf("d%d.", i+1)
		if got.GetCode().String() != want.code {
			diff(d+"code", want.code, got.GetCode())
		}
		var gotLimit *replayLimit
		if l := got.GetCurrentLimit(); l != nil {
			gotLimit = &replayLimit{rpu: l.GetRequestsPerUnit(), unit: l.GetUnit()}
		}
		if want.limit.String() != gotLimit.String() {
			diff(d+"limit", want.limit, gotLimit)
		}
		if want.remaining != nil && *want.remaining != got.GetLimitRemaining() {
			diff(d+"remaining", *want.remaining, got.GetLimitRemaining())
		}
		if want.name != nil && *want.name != got.GetCurrentLimit().GetName() {
			diff(d+"name", strconv.Quote(*want.name), strconv.Quote(got.GetCurrentLimit().GetName()))
		}
		if want.reset != nil {
			r := got.GetDurationUntilReset()
			switch {
			case *want.reset >= 0 && (r == nil || r.AsDuration() != time.Duration(*want.reset)*time.Second):
				diff(d+"reset", fmt.Sprintf("%ds", *want.reset), durationText(r.AsDuration(), r != nil))
			case *want.reset < 0 && (r == nil || r.GetNanos() != 0 || r.GetSeconds() <= 0):
				diff(d+"reset", "whole seconds > 0", durationText(r.AsDuration(), r != nil))
			}
		}
	}
	// Headers: what the peer adds (none unless response_headers) against what rlctl adds
	// (none unless response_headers: Headers.Omit otherwise).
	if _, on := c.settings["response_headers"]; !on || len(st.headers) > 0 {
		got := headerLines(resp.GetResponseHeadersToAdd())
		want := slices.Sorted(slices.Values(st.headers))
		if !slices.Equal(got, want) {
			diff("headers", want, got)
		}
	}
	return diffs
}

// statValue is rlctl's count of x's family for x's limit: the series of its name's
// labels (0 before the series exists).
func (s *replayServer) statValue(x replayStat) uint64 {
	s.stats.mu.RLock()
	defer s.stats.mu.RUnlock()
	if se := s.stats.series[statsLabels(x.key)]; se != nil {
		return se.n[statFamilies[x.family]].Load()
	}
	return 0
}

func durationText(d time.Duration, ok bool) string {
	if !ok {
		return "none"
	}
	return d.String()
}

func headerLines(hs []*corev3.HeaderValue) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, h.GetKey()+": "+h.GetValue())
	}
	slices.Sort(out)
	return out
}

// replayTally counts one backend's replay.
type replayTally struct {
	backend                  string
	sequences, steps, agreed int
	stats, unchecked         int
	unlisted                 []replayDiff
	byReason                 map[string]map[string]bool // per reason: the steps it excuses or blocks
	used                     map[int]bool               // knownDiffs entries that excused something
}

func (r *replayTally) add(c *replayCase, diffs []replayDiff) {
	r.sequences++
	r.steps += c.steps
	r.stats += c.stats
	r.unchecked += c.unchecked
	if len(diffs) == 0 {
		r.agreed++
	}
	if r.used == nil {
		r.used = map[int]bool{}
	}
	for _, d := range diffs {
		i := knownIndex(d, r.backend)
		if i < 0 {
			r.unlisted = append(r.unlisted, d)
			continue
		}
		r.used[i] = true
		reason := knownDiffs[i].reason
		if r.byReason[reason] == nil {
			r.byReason[reason] = map[string]bool{}
		}
		if strings.HasSuffix(d.at, "#load") {
			// A refused configuration blocks every step of the case.
			for n := 1; n <= c.steps; n++ {
				r.byReason[reason][fmt.Sprintf("%s#%d", c.id(), n)] = true
			}
			if c.steps == 0 {
				r.byReason[reason][d.at] = true
			}
			continue
		}
		r.byReason[reason][d.at] = true
	}
}

// knownIndex is the index of the knownDiffs entry that excuses d on backend, or -1.
func knownIndex(d replayDiff, backend string) int {
	for i, k := range knownDiffs {
		if k.backend != "" && k.backend != backend || !knownAt(k.at, d.at) {
			continue
		}
		if k.fields == "" || slices.Contains(strings.Split(k.fields, ","), d.field) {
			return i
		}
	}
	return -1
}

// knownAt reports whether an entry's place ("case#N", "case#N-M", "case#load", "case#rK")
// holds at, a disagreement's place.
func knownAt(place, at string) bool {
	if place == at {
		return true
	}
	c, steps, _ := strings.Cut(place, "#")
	dc, step, _ := strings.Cut(at, "#")
	from, to, ok := strings.Cut(steps, "-")
	n, err := strconv.Atoi(step)
	if c != dc || !ok || err != nil {
		return false
	}
	lo, err1 := strconv.Atoi(from)
	hi, err2 := strconv.Atoi(to)
	return err1 == nil && err2 == nil && lo <= n && n <= hi
}

func (r *replayTally) report(t *testing.T) {
	t.Helper()
	for _, d := range r.unlisted {
		t.Errorf("unlisted disagreement: %s", d)
	}
	t.Logf("%s: %d sequences replayed, %d steps, %d sequences agree in every step; of the peer's %d statistics, %d (its limits') checked, %d others (local cache, config loads, errors) recorded",
		r.backend, r.sequences, r.steps, r.agreed, r.stats, r.stats-r.unchecked, r.unchecked)
	reasons := slices.Sorted(func(yield func(string) bool) {
		for k := range r.byReason {
			if !yield(k) {
				return
			}
		}
	})
	for _, reason := range reasons {
		t.Logf("%s: %-40s %3d steps  %s", r.backend, reason, len(r.byReason[reason]), reasonText[reason])
	}
}

// checkStale fails on a knownDiffs entry that excused nothing on every backend that ran
// and that it applies to: the list must stay exact.
func checkStale(t *testing.T, results map[string]*replayTally) {
	t.Helper()
	for i, k := range knownDiffs {
		ran, used := false, false
		for backend, r := range results {
			if k.backend != "" && k.backend != backend || r.sequences == 0 {
				continue
			}
			ran = true
			used = used || r.used[i]
		}
		if ran && !used {
			t.Errorf("stale knownDiffs entry %q %q (%s): rlctl now agrees with the peer there; remove the entry", k.at, k.fields, k.reason)
		}
	}
}
