package verify

import (
	"context"
	"errors"
	"fmt"
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
// algorithms (through the prelude's call, or redis.call and redis.pcall) a point where the
// running client yields, and logs the commands in the order they run.
const harnessPrelude = `
-- verify harness: every Redis command is a scheduling point.
local harness_call, harness_pcall = redis.call, redis.pcall
local harness_log, harness_client = {}, 0
call = function(...)
  coroutine.yield()
  harness_log[#harness_log + 1] = harness_client .. ' ' .. select(1, ...)
  return harness_call(...)
end
local redis = setmetatable({
  call = call,
  pcall = function(...)
    coroutine.yield()
    harness_log[#harness_log + 1] = harness_client .. ' ' .. select(1, ...)
    return harness_pcall(...)
  end,
}, {__index = redis})
`

// harnessMain replaces the dispatcher.
//
// KEYS: the one key every client uses.
// ARGV: now_us, n clients, then per client: algorithm, cost, parameters; then the
// schedule: client numbers (1-based). Each entry runs that client's next command (the
// next live client's when it has finished). Clients left unfinished when the schedule
// ends run to completion in order.
// Reply: {{allowed per client (1/0)}, {"<client> <COMMAND>" in execution order}}.
const harnessMain = `
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
  cos[i] = coroutine.create(function()
    local ok, _, _, _, _, write = check(KEYS[1], now, cost, p)
    if ok == 1 then
      if write and cost > 0 then
        commit(KEYS[1], write)
      end
      allowed[i] = 1
    end
  end)
end
local function step(i)
  harness_client = i
  local ok, err = coroutine.resume(cos[i])
  if not ok then
    error(err)
  end
end
for i = 1, n do
  step(i)
end
for k = a, #ARGV do
  local want = tonumber(ARGV[k])
  for d = 0, n - 1 do
    local i = (want - 1 + d) % n + 1
    if coroutine.status(cos[i]) ~= 'dead' then
      step(i)
      break
    end
  end
end
for i = 1, n do
  while coroutine.status(cos[i]) ~= 'dead' do
    step(i)
  end
end
return {allowed, harness_log}
`

// harness is the command-granularity script of an engine script, with the host it runs
// on (reused: emptied before each run).
type harness struct {
	src, sha string
	clock    *luahost.ManualClock
	h        *luahost.Host
}

func newHarness(s *algorithms.Script) (*harness, error) {
	const open, end = "\nlocal function load_algorithm(name)\n", "\nreturn nil\nend\n"
	i := strings.Index(s.Source, open)
	j := strings.LastIndex(s.Source, end)
	if i < 0 || j < i {
		return nil, errors.New("verify: the engine script does not have the layout the race harness expects")
	}
	j += len(end)
	src := s.Source[:i] + harnessPrelude + s.Source[i:j] + harnessMain
	hs := &harness{src: src, clock: luahost.NewManualClock(Epoch)}
	hs.h = luahost.New(luahost.WithClock(hs.clock), luahost.WithCommands(s.Commands()...))
	var err error
	if hs.sha, err = hs.h.Load(src); err != nil {
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

// raceRun is what a sequence of rounds did.
type raceRun struct {
	allowed [][]bool
	log     [][]string
	calls   int
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
		v, err := h.EvalSHA(context.Background(), hs.sha, []string{sub.key}, argv)
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
	}
	return out, nil
}

func decodeHarness(v any, n int) ([]bool, []string, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
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
// the total allowed (0, total when within).
func raceExcess(sub *subject, rounds []raceRound, run *raceRun) (over, total int64) {
	for r, rd := range rounds {
		for i, c := range rd.clients {
			if run.allowed[r][i] {
				total += c.cost
			}
		}
	}
	return total - sub.spec.limit, total
}

// commandRace runs sub's algorithm with its commands interleaved across clients at one
// instant: an adversarial schedule first (every client's reads before any write, after
// filling the key to one below its limit), then seeded random ones.
func (c *checker) commandRace(p *dsl.Policy, ru *dsl.Rule, sub *subject, params string) (Result, error) {
	r := Result{Policy: p.Name, Rule: ru.Name, Algorithm: sub.alg.Name, Params: params, Property: PropRaceCommand, Statement: stmtRaceR}
	if sub.spec.kind == boundNone {
		r.Status, r.Detail = Skip, "the algorithm states no limit verify knows"
		return r, nil
	}
	limit := sub.spec.limit
	rng := c.rng(p.Name, ru.Name, params, "race")
	at := (1 + rng.Int64N(4)) * max(sub.spec.window/8, 1) // inside a window, away from its boundary
	lease := 0
	client := func(cost int64) raceClient {
		lease++
		return raceClient{cost: cost, lease: lease}
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
	calls := 0
	for _, rounds := range candidates {
		run, err := c.harness.run(sub, at, rounds)
		if err != nil {
			return r, err
		}
		calls += run.calls
		c.calls += run.calls
		if over, _ := raceExcess(sub, rounds, run); over <= 0 {
			continue
		}
		fails := func(try []raceRound) bool {
			run, err := c.harness.run(sub, at, try)
			if err != nil {
				return false
			}
			c.calls += run.calls
			over, _ := raceExcess(sub, try, run)
			return over > 0
		}
		small := shrinkRounds(rounds, fails)
		run, err = c.harness.run(sub, at, small)
		if err != nil {
			return r, err
		}
		_, total := raceExcess(sub, small, run)
		r.Status = Note
		r.Detail = fmt.Sprintf("without the script's atomicity, %d allowed at one instant against a limit of %d: a client read the state before another wrote it (in one script call the algorithm is atomic: see race)", total, limit)
		r.Counterexample = raceCounterexample(at, small, run, countClients(rounds))
		r.Calls = calls
		return r, nil
	}
	r.Status = Pass
	r.Detail = fmt.Sprintf("no interleaving of %d tried broke the limit", len(candidates))
	r.Calls = calls
	return r, nil
}

func countClients(rounds []raceRound) int {
	n := 0
	for _, rd := range rounds {
		n += len(rd.clients)
	}
	return n
}

// shrinkRounds shrinks a failing race: fewer rounds, fewer clients, shorter schedules,
// smaller costs.
func shrinkRounds(rounds []raceRound, fails func([]raceRound) bool) []raceRound {
	runs := shrinkRuns
	rounds = shrinkSlice(rounds, fails, &runs)
	for i := range rounds {
		at := func(rd raceRound) []raceRound {
			try := slices.Clone(rounds)
			try[i] = rd
			return try
		}
		clients := shrinkSlice(rounds[i].clients, func(cs []raceClient) bool {
			return len(cs) > 0 && fails(at(raceRound{clients: cs, schedule: clamp(rounds[i].schedule, len(cs))}))
		}, &runs)
		rounds[i] = raceRound{clients: clients, schedule: clamp(rounds[i].schedule, len(clients))}
		sched := shrinkSlice(rounds[i].schedule, func(s []int) bool {
			return fails(at(raceRound{clients: rounds[i].clients, schedule: s}))
		}, &runs)
		rounds[i].schedule = sched
		rounds[i].clients = simplify(rounds[i].clients, func(c raceClient) []raceClient {
			if c.cost <= 1 {
				return nil
			}
			return []raceClient{{cost: 1, lease: c.lease}}
		}, func(cs []raceClient) bool {
			return fails(at(raceRound{clients: cs, schedule: rounds[i].schedule}))
		}, &runs)
	}
	return rounds
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
		for i, c := range rd.clients {
			res := "denied"
			if run.allowed[r][i] {
				res = "allowed"
			}
			if len(rd.clients) == 1 {
				res += " (alone: one script call)"
			}
			ce.Steps = append(ce.Steps, CounterStep{At: t, Client: offset + i + 1, Request: fmt.Sprintf("cost %d", c.cost), Result: res, Mark: run.allowed[r][i]})
		}
		offset += len(rd.clients)
	}
	return ce
}
