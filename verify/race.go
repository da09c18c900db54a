package verify

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/luahost"
)

// This file runs an algorithm without the script's atomicity: each client's check and
// commit run as a Lua coroutine that yields before every redis.call, so a schedule can
// interleave the clients' commands one by one, as separate commands from separate
// clients would interleave on a Redis server. It uses the algorithm's real Lua: the
// harness is the engine script with its dispatcher replaced.

// harnessPrelude follows the engine prelude: it makes every Redis command of the
// algorithms (through the prelude's call and redis_pcall, or redis.call and redis.pcall) a
// point where the running client yields, and logs the commands in the order they run.
// harness_main binds the prelude's locals with the prelude's bind, as the dispatcher does,
// then puts the yielding call and redis_pcall back.
const harnessPrelude = `
-- verify harness: every Redis command is a scheduling point.
local harness_call, harness_pcall
-- The coroutine library's functions, bound by harness_main with the prelude's locals.
local co_create, co_resume, co_status, co_yield
local harness_log, harness_client = {}, 0
call = function(cmd, ...)
  co_yield()
  harness_log[#harness_log + 1] = harness_client .. ' ' .. cmd
  return harness_call(cmd, ...)
end
-- harness_redis returns the global redis: the server's, at call time.
local harness_redis = function() return redis end
-- The algorithms' redis: call and pcall yield first, the rest is the server's (harness_main
-- sets the fallback at call time: the library's code runs before it has one).
local redis = {
  call = call,
  pcall = function(cmd, ...)
    co_yield()
    harness_log[#harness_log + 1] = harness_client .. ' ' .. cmd
    return harness_pcall(cmd, ...)
  end,
}
`

// harnessMain replaces the dispatcher: it registers harness_main as the function
// rlctl_harness of the harness's library, loaded once per host (FUNCTION LOAD), so the
// built-in algorithms are instantiated once, not on every call.
//
// KEYS: the one key every client uses.
// ARGV: now_us, n clients, then per client: algorithm, cost, parameters; then the
// schedule: client numbers (1-based). Each entry runs that client's next command (the
// next live client's when it has finished). Clients left unfinished when the schedule
// ends run to completion in order.
// Reply: {{allowed per client (1/0)}, {"<client> <COMMAND>" in execution order}, the
// client whose call raised an error (0: none), its error}. A client's error ends the run.
const harnessMain = `
local function harness_main(KEYS, ARGV)
if not harness_call then
  local server = harness_redis()
  setmetatable(redis, {__index = server})
  harness_call, harness_pcall = server.call, server.pcall
  bind()
  call, redis_pcall = redis.call, redis.pcall
  local co = _G.coroutine
  co_create, co_resume, co_status, co_yield = co.create, co.resume, co.status, co.yield
end
harness_log, harness_client = {}, 0
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local a = 3
local cos, allowed = {}, {}
for i = 1, n do
  local name = ARGV[a]
  local kinds, _, check, commit = load_algorithm(name)
  if kinds == nil then
    return redis.error_reply('harness: unknown algorithm ' .. tostring(name))
  end
  local cost = tonumber(ARGV[a + 1])
  local p = {}
  for j = 1, #kinds do
    local s = ARGV[a + 1 + j]
    if kinds[j] == 'str' then
      p[j] = s
    else
      p[j] = tonumber(s)
    end
  end
  a = a + 2 + #kinds
  allowed[i] = 0
  cos[i] = co_create(function()
    local ok, _, _, _, _, write = check(KEYS[1], now, cost, p)
    if ok == 1 then
      if write and cost > 0 then
        commit(KEYS[1], write)
      end
      allowed[i] = 1
    end
  end)
end
local failed, failure = 0, ''
local function step(i)
  harness_client = i
  local ok, err = co_resume(cos[i])
  if not ok then
    if type(err) == 'table' then
      err = err.err
    end
    failed, failure = i, tostring(err)
  end
  return ok
end
for i = 1, n do
  if not step(i) then
    return {allowed, harness_log, failed, failure}
  end
end
for k = a, #ARGV do
  local want = tonumber(ARGV[k])
  for d = 0, n - 1 do
    local i = (want - 1 + d) % n + 1
    if co_status(cos[i]) ~= 'dead' then
      if not step(i) then
        return {allowed, harness_log, failed, failure}
      end
      break
    end
  end
end
for i = 1, n do
  while co_status(cos[i]) ~= 'dead' do
    if not step(i) then
      return {allowed, harness_log, failed, failure}
    end
  end
end
return {allowed, harness_log, 0, ''}
end
harness_redis().register_function('rlctl_harness', harness_main)
`

// harness is the command-granularity script of an engine script, with the host it runs
// on (reused: emptied before each run).
type harness struct {
	clock  *luahost.ManualClock
	h      *luahost.Host
	script *algorithms.Script
	// The harness's lines after `from` are the engine script's, `shift` lines later, up
	// to `to` (the harness's own main after it).
	from, shift, to int
	// tick, when set, is called after every script call.
	tick func()
	// fcall calls the harness as the rig calls the engine script (see fcaller).
	fcall func(ctx context.Context, function string, keys, args []string) (any, error)
}

// harnessLibrary is the first line of the harness's library.
const harnessLibrary = "#!lua name=rlctl_harness\n"

// harnessLine is a line of the harness in an error text: line 1 is its "#!lua" line.
var harnessLine = regexp.MustCompile(`\buser_function:(\d+)\b`)

// locate maps the lines an error of the harness names to the engine script's files and
// lines; the harness's own lines are named as such.
func (hs *harness) locate(msg string) string {
	msg = harnessLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(m[len("user_function:"):])
		n-- // the "#!lua" line
		switch {
		case n <= hs.from:
		case n > hs.from+hs.shift && n <= hs.to:
			n -= hs.shift
		default:
			return "verify's race harness line " + strconv.Itoa(n)
		}
		return "user_script:" + strconv.Itoa(n)
	})
	return hs.script.Locate(msg)
}

func newHarness(s *algorithms.Script) (*harness, error) {
	// load_algorithm's first line, and its last as algorithms.Assemble writes it.
	const open, end = "\nlocal function load_algorithm(name)\n", "\nreturn nil\nend -- load_algorithm\n"
	i := strings.Index(s.Source, open)
	j := strings.LastIndex(s.Source, end)
	if i < 0 || j < i {
		return nil, errors.New("verify: the engine script does not have the layout the race harness expects")
	}
	j += len(end)
	src := harnessLibrary + s.Source[:i] + harnessPrelude + s.Source[i:j] + harnessMain
	hs := &harness{clock: luahost.NewManualClock(Epoch), script: s}
	hs.from = 1 + strings.Count(s.Source[:i], "\n")
	hs.shift = strings.Count(harnessPrelude, "\n")
	hs.to = 1 + strings.Count(s.Source[:j], "\n") + hs.shift
	hs.h = newHost(hs.clock, s.Commands())
	hs.fcall = fcaller(hs.h, s)
	var err error
	if _, err = hs.h.FunctionLoad(src, true); err != nil {
		return nil, fmt.Errorf("verify: loading the race harness: %w", err)
	}
	return hs, nil
}

// raceClient is one client of a race round.
type raceClient struct {
	cost  int64
	lease int
}

// raceRound is concurrent clients at one instant, interleaved by schedule.
type raceRound struct {
	clients  []raceClient
	schedule []int // 1-based client numbers
}

// raceRun is what a sequence of rounds did. A client's error ends it: failed is then
// that client of the last round (1-based) and failure its error, at the engine script's
// files and lines.
type raceRun struct {
	allowed [][]bool
	log     [][]string
	calls   int
	failed  int
	failure string
}

// run executes rounds at trace time at on a fresh host.
func (hs *harness) run(sub *subject, at int64, rounds []raceRound) (*raceRun, error) {
	h := hs.h
	hs.clock.Set(time.UnixMicro(base + at))
	for _, k := range h.Keys() {
		if _, err := h.Do(context.Background(), "DEL", k); err != nil {
			return nil, err
		}
	}
	out := &raceRun{}
	for _, rd := range rounds {
		argv := []string{strconv.FormatInt(base+at, 10), strconv.Itoa(len(rd.clients))}
		for _, c := range rd.clients {
			argv = append(argv, sub.alg.Name, strconv.FormatInt(c.cost, 10))
			for i, v := range sub.params {
				if i == sub.lease {
					argv = append(argv, leaseID(c.lease))
				} else {
					argv = append(argv, strconv.FormatInt(v, 10))
				}
			}
		}
		for _, s := range rd.schedule {
			argv = append(argv, strconv.Itoa(s))
		}
		v, err := hs.fcall(context.Background(), "rlctl_harness", []string{sub.key}, argv)
		if hs.tick != nil {
			hs.tick()
		}
		if errors.Is(err, luahost.ErrInstructionLimit) {
			// A call past the instruction limit stops the whole round, and the host
			// cannot tell which client was running: the round's first client carries
			// the error, and the run goes on as after any client's error.
			out.calls++
			out.allowed = append(out.allowed, make([]bool, len(rd.clients)))
			out.log = append(out.log, nil)
			out.failed, out.failure = 1, hs.locate(err.Error())
			break
		}
		if err != nil {
			return nil, err
		}
		out.calls++
		al, log, err := decodeHarness(v, len(rd.clients))
		if err != nil {
			return nil, err
		}
		out.allowed = append(out.allowed, al)
		out.log = append(out.log, log)
		if arr := v.([]any); arr[2] != int64(0) {
			f, _ := arr[2].(int64)
			msg, _ := arr[3].(string)
			out.failed, out.failure = int(f), hs.locate(msg)
			break
		}
	}
	return out, nil
}

func decodeHarness(v any, n int) ([]bool, []string, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 4 {
		return nil, nil, fmt.Errorf("verify: race harness reply %v", v)
	}
	flags, _ := arr[0].([]any)
	entries, _ := arr[1].([]any)
	if len(flags) != n {
		return nil, nil, fmt.Errorf("verify: race harness reply has %d verdicts for %d clients", len(flags), n)
	}
	al := make([]bool, n)
	for i, f := range flags {
		al[i] = f == int64(1)
	}
	log := make([]string, len(entries))
	for i, e := range entries {
		log[i], _ = e.(string)
	}
	return al, log, nil
}

// raceExcess returns how far the clients allowed at one instant went past the limit, with
// the total allowed (0, total when within). A run that stopped at a failing round counts
// the rounds it ran.
func raceExcess(sub *subject, rounds []raceRound, run *raceRun) (over, total int64) {
	for r, rd := range rounds[:min(len(rounds), len(run.allowed))] {
		for i, c := range rd.clients {
			if i < len(run.allowed[r]) && run.allowed[r][i] {
				total += c.cost
			}
		}
	}
	return total - sub.spec.limit, total
}

// commandRace runs sub's algorithm with its commands interleaved across clients at one
// instant: an adversarial schedule first (every client's reads before any write, after
// filling the key to one below its limit), then seeded random ones. An interleaving in
// which a client's call raises an error is reported when none breaks the limit: as a
// note when no single request raised an error (erred, asked only then: the rule's errors
// property failed),
// else as skipped.
func (c *checker) commandRace(p *dsl.Policy, ru *dsl.Rule, sub *subject, params string, erred func() bool) (Result, error) {
	r := Result{Policy: p.Name, Rule: ru.Name, Algorithm: sub.alg.Name, Params: params, Property: PropRaceCommand, Statement: stmtRaceR}
	if sub.spec.shape == algorithms.ShapeNone {
		r.Status, r.Detail = Skip, sub.spec.noLimit()
		return r, nil
	}
	if c.harness == nil {
		hs, err := newHarness(c.script)
		if err != nil {
			return r, err
		}
		hs.tick = c.tick
		c.harness = hs
	}
	limit := sub.spec.limit
	rng := c.rng(p.Name, ru.Name, params, "race")
	at := (1 + rng.Int64N(4)) * max(sub.spec.window/8, 1) // inside a window, away from its boundary
	lease := 0
	client := func(cost int64) raceClient {
		lease++
		return raceClient{cost: sub.costAtMost(cost), lease: lease}
	}
	var candidates [][]raceRound
	// Adversarial: fill to limit-1 atomically, then two clients read before either writes.
	var adv []raceRound
	if limit > 1 {
		adv = append(adv, raceRound{clients: []raceClient{client(limit - 1)}})
	}
	rr := make([]int, 64)
	for i := range rr {
		rr[i] = 1 + i%2
	}
	adv = append(adv, raceRound{clients: []raceClient{client(1), client(1)}, schedule: rr})
	candidates = append(candidates, adv)
	attempts := min(max(c.o.budget/20, 8), 500)
	for range attempts {
		var rounds []raceRound
		for range 1 + rng.IntN(3) {
			n := 2 + rng.IntN(c.o.clients-1)
			rd := raceRound{}
			for range n {
				rd.clients = append(rd.clients, client(1+rng.Int64N(max(limit/int64(n), 1))))
			}
			for range 4 * n * (1 + rng.IntN(6)) {
				rd.schedule = append(rd.schedule, 1+rng.IntN(n))
			}
			rounds = append(rounds, rd)
		}
		candidates = append(candidates, rounds)
	}
	calls, errored := 0, 0
	var failing, breach []raceRound // the first interleavings that raised an error, broke the limit
	for _, rounds := range candidates {
		run, err := c.harness.run(sub, at, rounds)
		if err != nil {
			return r, err
		}
		calls += run.calls
		c.calls += run.calls
		if run.failed > 0 {
			errored++
			if failing == nil {
				failing = rounds
			}
		} else if over, _ := raceExcess(sub, rounds, run); over > 0 && breach == nil {
			breach = rounds
		}
	}
	r.Calls = calls
	switch {
	case failing != nil && !erred():
		return c.interleavingError(r, sub, at, failing, errored, len(candidates))
	case breach != nil:
		small := shrinkRounds(breach, func(try []raceRound) bool {
			run, err := c.harness.run(sub, at, try)
			if err != nil {
				return false
			}
			c.calls += run.calls
			if run.failed > 0 {
				return false
			}
			over, _ := raceExcess(sub, try, run)
			return over > 0
		})
		run, err := c.harness.run(sub, at, small)
		if err != nil {
			return r, err
		}
		_, total := raceExcess(sub, small, run)
		r.Status = Note
		r.Detail = fmt.Sprintf("without the script's atomicity, %d allowed at one instant against a limit of %d: a client read the state before another wrote it (in one script call the algorithm is atomic: see race)", total, limit)
		r.Counterexample = raceCounterexample(at, small, run, countClients(breach))
	case failing != nil:
		first, err := c.harness.run(sub, at, failing)
		if err != nil {
			return r, err
		}
		r.Status = Skip
		r.Detail = fmt.Sprintf("not checked: a client's call raised an error in %d of %d interleavings (%s), as single requests do: see errors", errored, len(candidates), first.failure)
	default:
		r.Status = Pass
		r.Detail = fmt.Sprintf("no interleaving of %d tried broke the limit", len(candidates))
	}
	return r, nil
}

// interleavingError makes r the note of an error that a client's call raised only when
// the algorithm ran as separate commands: failing, shrunk against "raises the same
// error".
func (c *checker) interleavingError(r Result, sub *subject, at int64, failing []raceRound, errored, tried int) (Result, error) {
	first, err := c.harness.run(sub, at, failing)
	if err != nil {
		return r, err
	}
	want := first.failure
	small := shrinkRounds(failing, func(try []raceRound) bool {
		run, err := c.harness.run(sub, at, try)
		if err != nil {
			return false
		}
		c.calls += run.calls
		return run.failure == want
	})
	run, err := c.harness.run(sub, at, small)
	if err != nil {
		return r, err
	}
	if run.failure != want {
		small, run = failing, first
	}
	r.Status, r.Error = Note, want
	r.Detail = fmt.Sprintf("without the script's atomicity, a client's call raised an error in %d of %d interleavings: %s (no single request did: a client read state another had written only part of)", errored, tried, want)
	r.Counterexample = raceCounterexample(at, small, run, countClients(failing))
	return r, nil
}

func countClients(rounds []raceRound) int {
	n := 0
	for _, rd := range rounds {
		n += len(rd.clients)
	}
	return n
}

// shrinkRounds shrinks a failing race: fewer rounds, then in each round fewer clients,
// shorter schedules and smaller costs, again until none of them helps (a shorter schedule
// can make a client unnecessary).
func shrinkRounds(rounds []raceRound, fails func([]raceRound) bool) []raceRound {
	runs := shrinkRuns
	rounds = shrinkSlice(rounds, fails, &runs)
	for i := range rounds {
		at := func(rd raceRound) []raceRound {
			try := slices.Clone(rounds)
			try[i] = rd
			return try
		}
		for size := -1; size != roundSize(rounds[i]) && runs > 0; {
			size = roundSize(rounds[i])
			clients := shrinkSlice(rounds[i].clients, func(cs []raceClient) bool {
				return len(cs) > 0 && fails(at(raceRound{clients: cs, schedule: clamp(rounds[i].schedule, len(cs))}))
			}, &runs)
			rounds[i] = raceRound{clients: clients, schedule: clamp(rounds[i].schedule, len(clients))}
			rounds[i].schedule = shrinkSlice(rounds[i].schedule, func(s []int) bool {
				return fails(at(raceRound{clients: rounds[i].clients, schedule: s}))
			}, &runs)
			rounds[i].clients = simplify(rounds[i].clients, func(c raceClient) []raceClient {
				if c.cost <= 1 {
					return nil
				}
				return []raceClient{{cost: 1, lease: c.lease}}
			}, func(cs []raceClient) bool {
				return fails(at(raceRound{clients: cs, schedule: rounds[i].schedule}))
			}, &runs)
		}
	}
	return rounds
}

// roundSize is how much there is left to shrink in a round.
func roundSize(rd raceRound) int {
	n := len(rd.clients) + len(rd.schedule)
	for _, c := range rd.clients {
		n += int(c.cost)
	}
	return n
}

// clamp drops schedule entries naming clients beyond n.
func clamp(schedule []int, n int) []int {
	var out []int
	for _, s := range schedule {
		if s <= n {
			out = append(out, s)
		}
	}
	return out
}

// raceCounterexample renders a race: each round's commands in the order they ran (a
// client's run of the same command as one step), then each client's verdict. A round of
// one client has no interleaving: it is shown as its verdict alone.
func raceCounterexample(at int64, rounds []raceRound, run *raceRun, original int) *Counterexample {
	ce := &Counterexample{Original: original, Unit: "clients"}
	t := time.Duration(at) * time.Microsecond
	offset := 0
	for r, rd := range rounds {
		if len(rd.clients) > 1 {
			var last *CounterStep
			repeat := 1
			flush := func() {
				if last != nil {
					if repeat > 1 {
						last.Request += fmt.Sprintf(" ×%d", repeat)
					}
					ce.Steps = append(ce.Steps, *last)
				}
			}
			for _, e := range run.log[r] {
				client, cmd, _ := strings.Cut(e, " ")
				n, _ := strconv.Atoi(client)
				if last != nil && last.Client == offset+n && last.Request == cmd {
					repeat++
					continue
				}
				flush()
				last, repeat = &CounterStep{At: t, Client: offset + n, Request: cmd}, 1
			}
			flush()
		}
		failed := run.failed > 0 && r == len(run.allowed)-1
		for i, c := range rd.clients {
			res := "denied"
			if run.allowed[r][i] {
				res = "allowed"
			}
			if len(rd.clients) == 1 {
				res += " (alone: one script call)"
			}
			mark := run.allowed[r][i]
			if failed {
				switch {
				case i+1 == run.failed:
					res = "ERROR " + run.failure
				case !mark:
					res = "not allowed when the run stopped"
				}
				mark = i+1 == run.failed
			}
			ce.Steps = append(ce.Steps, CounterStep{At: t, Client: offset + i + 1, Request: fmt.Sprintf("cost %d", c.cost), Result: res, Mark: mark})
		}
		offset += len(rd.clients)
		if failed {
			break
		}
	}
	return ce
}
