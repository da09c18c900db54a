// Package dsl reads rlctl's policy language: HCL files of policies, their rules, plugin
// algorithms and scenarios, into a typed, validated [Config].
//
// [Load] reads files and directories, [Parse] sources in memory. Every problem is an
// [hcl.Diagnostic] with the range of the construct at fault, a Detail that says how to
// fix it, and did-you-mean suggestions for names; [WriteDiagnostics] renders them with
// source snippets. [Format] rewrites a file canonically. Expressions compile to [Expr]:
// constants fold at load time, the common forms (references, templates, comparisons,
// boolean operators, conditionals, whole-number arithmetic, table lookups and the string
// functions) run as Go closures that give HCL's value, and the rest is evaluated by HCL per
// request.
//
// # Policy language
//
// Files hold five kinds of block, in any order and spread over any number of files
// (names are global across them):
//
//	locals {                       # constants; may read other locals and call functions
//	  tiers = { free = 60, pro = 600 }
//	}
//
//	policy "public_api" {
//	  match    = startswith(request.path, "/v1/")  # bool; default: every request
//	  shard    = request.tenant    # Redis Cluster hash tag; default: none
//	  on_error = "allow"           # "allow" (default) | "deny" | "local"
//	  local_share = 3              # on_error = "local" only: instances that may fall back
//	                               # at once; each keeps 1/3 of every limit (default 1)
//	  clock    = "server"          # "server" (default) | "client"
//	  clock_skew = "250ms"         # clock = "client" only: how far apart callers' clocks may be
//
//	  rule "per_user" {            # checked in order; charged all or nothing
//	    algorithm = "gcra"         # a built-in or a plugin
//	    key       = request.user   # string: what the counter is kept per
//	    when      = request.user != ""   # bool; default: always
//	    cost      = 1              # whole number >= 0; default 1
//	    shadow    = false          # count but never enforce; constant
//	    accept_bound = false       # accept the algorithm's declared bound (verify: a note); constant
//	    stats_key = "edge.path"    # string: rlctl serve's envoyproxy/ratelimit statistics; default none
//	    replaces  = ["per_ip"]     # rules of the policy that do not apply to a decision this one does
//	    block_for = "15m"          # penalty box: a denial blocks the key this long; constant
//	    block_max = "24h"          # optional: repeat offences double the block up to this
//	    overridable = false        # a key may get other figures at runtime (built-ins); constant
//	    exempt    = list("partners")    # keys on this runtime list pass the rule, uncharged
//	    deny      = list("banned")      # keys on this runtime list are refused by the rule
//	    deny_retry = "1h"          # the retry-after a refusal by the deny list states; default 1h
//	    time_zone = "Europe/Berlin"     # fixed_window with window = "calendar_day" | "calendar_week"
//	                               # | "calendar_week_sunday" | "calendar_month" | "calendar_year":
//	                               # periods from the zone's local midnight; default UTC
//	    rate      = "10/s"         # the algorithm's parameters...
//	    burst     = lookup(local.tiers, request.plan, 60)  # ...constants or expressions
//	  }
//
//	  unlimited "internal" {       # requests left unlimited on purpose, reported as such
//	    when     = request.ip == "127.0.0.1"  # bool; default: every request of the policy
//	    replaces = ["per_ip"]      # optional: rules that do not apply to a decision it names
//	  }
//	}
//
//	algorithm "quota" {            # a Lua plugin (see lua/dispatch.lua for the contract)
//	  source   = "quota.lua"       # relative to this file
//	  params   = { limit = "count", window = "duration" }  # wire order; count|whole|flag|duration|rate|lease
//	  commands = ["HMGET", "HSET", "PEXPIRE"]               # the only commands it may call (1)
//	  doc      = "one sentence"    # optional
//	  max_cost = 1                 # optional: the most one request may charge a rule
//	  keys     = ["cur", "prev"]   # optional: further keys, subkey(key, NAME) in the Lua
//	  guarantee "window" {         # what verify holds it to (see guarantee.go)
//	    amount = param.limit
//	    window = param.window
//	    precision { resolution = "1ms" }  # optional: its clock's tick, how late answers are
//	  }
//	  guarantee "window" {         # optional: more statements it keeps at once
//	    amount = param.limit * 100
//	    window = "30d"
//	  }
//	  work "hash" {                # optional: its worst case on Redis (see work.go)
//	    commands = 3               # per call, over param.NAME, cost.min and cost.max
//	    elements = 4
//	    entries  = 2               # per key; the memory is computed from it
//	  }
//	}
//
//	budget {                       # what a rule may cost Redis before validate warns;
//	  work   = 2000                # top level (every policy) or in a policy; defaults shown
//	  memory = "64KiB"
//	}
//
//	scenario "stuffing" {          # run by rlctl simulate / verify
//	  policy   = "public_api"
//	  duration = "5m"              # virtual time
//	  seed     = 1                 # optional
//	  start_time = "2027-03-26T00:00:00+01:00"  # optional: the instant virtual time 0 stands for
//	  traffic "users" {
//	    request = { ip = "198.51.100.${client % 256}", user = "u${client}" }
//	    clients = 500              # default 1; client is 0..clients-1
//	    rate    = "2/m"            # per client
//	    pattern = "poisson"        # constant (default) | poisson | burst | ramp | edge
//	    burst   = 10               # pattern "burst" only
//	    start   = "0s"             # default 0
//	    stop    = "5m"             # default: the scenario's duration
//	    hold    = "10s"            # how long an allowed request lasts; default 0
//	    units   = 8                # units each request asks for (AllowN's n); default 1
//	    at_most = true             # grant the most of units that fit (AllowAtMost)
//	    max_delay = "2s"           # wait up to this for a turn rather than be denied (Wait)
//	    actual  = [120, 480, 2000] # reserve units as an estimate, settle each with the next (Reserve, Settle)
//	  }
//	  fault {                      # Redis failing; any number, never overlapping
//	    kind  = "stall"            # stall | refuse | error | flush | restart
//	    at    = "2m"               # when, from the scenario's start
//	    for   = "30s"              # how long; a flush is an instant and has none
//	    reply = "READONLY ..."     # kind "error" only; default Redis's OOM reply
//	  }
//	  override {                   # an operator's override of one key (overridable rules)
//	    at      = "1m"
//	    rule    = "per_user"
//	    request = { user = "acme" }          # the request whose key it is
//	    set     = { rate = "100/s" }         # absent: clear the key's override
//	    for     = "2m"                       # optional: the override then ends
//	  }
//	  list {                       # an operator's list change
//	    at      = "2m"
//	    add     = "banned"                   # or remove = "banned"
//	    request = { ip = "203.0.113.9" }     # the request whose keys go on the list
//	  }
//	  engine {                     # optional: the engine as deployed; defaults shown
//	    deadline         = "50ms"  # a Redis call unanswered by then fails
//	    breaker_failures = 5       # failures in a row that open the circuit breaker
//	    breaker_cooldown = "1s"    # how long it stays open before one request probes
//	    deny_cache       = 0       # denials remembered to answer repeats without Redis
//	    max_memory       = "256KiB"  # optional: the simulated Redis's maxmemory
//	    eviction         = "noeviction"  # its maxmemory-policy past max_memory
//	    instances        = 1       # engines sharing the simulated Redis, requests in turn
//	  }
//	  expect {
//	    users_served = denied_fraction("users") < 0.01
//	  }
//	}
//
// A fault's kinds: "stall" (Redis stops answering: each call sent during it times out at
// the engine's deadline, and the server runs the calls it received when the stall ends),
// "refuse" (connections refused), "error" (every call gets the error reply), "flush"
// (every key lost at once) and "restart" (refused for a while, then back with no keys).
// While a fault fails calls, each policy decides by its on_error, the circuit breaker
// opens after breaker_failures failures in a row, and the deny cache answers repeats of
// recent denials; the expectation functions of [Expect] measure what that did.
//
// With on_error = "local" each instance of the service decides alone while Redis fails,
// from empty counters, so n instances would admit n times a rule's limit. local_share = n
// declares how many may fall back at once, and each instance's fallback then runs every
// rule of the policy at its share (algorithms.Algorithm.Share), scaling what the rule's
// algorithm declares its limit to be (its guarantee): the amount (a window's limit, a
// bucket's capacity, gcra's burst, concurrency's max) becomes max(1, floor(amount/n)),
// a rate becomes exactly 1/n of itself (its period times n), windows and lease lifetimes
// stay. The n instances then admit together at most n × max(1, floor(L/n)) per window,
// at most L when L >= n, besides what Redis admits (a window that straddles the outage's
// start or end sees at most 2L: L from Redis, L from the fleet). A plugin whose guarantee's figures
// are not plain param.NAME references cannot be shared, and local_share is refused on
// its rules.
//
// The built-in algorithms and their parameters are fixed_window, sliding_log and
// sliding_window (limit, window), token_bucket and leaky_bucket (capacity, rate), gcra
// (rate, burst) and concurrency (max, ttl; the lease is the engine's).
//
// Durations are whole numbers with a unit, largest first: "250ms", "30s", "1m30s", "1d"
// (units ms, s, m, h, d); the shortest is 1ms, the clock resolution. Rates are an amount
// per period: "10/s", "600/m", "5/250ms"; they are reduced ("600/m" is 1 per 100ms).
//
// # Expressions
//
// Policy expressions read request.<attribute> (or request["x-api-key"]): every attribute
// is a string, and an attribute the request lacks is "". They read local.<name> and call
// HCL's usual functions (lower, upper, format, join, split, replace, regex, lookup,
// coalesce, concat, length, min, max, contains, try, can, …) plus startswith, endswith,
// strcontains, glob (glob(request.path, "/v1/*/upload"): '*' matches any run of
// characters) and cidrcontains. The common forms run without HCL evaluation and give what
// HCL would, errors included (HCL evaluates whatever they cannot promise); see [Expr].
//
// # Validation
//
// Besides syntax, names and types, Load reports: unknown algorithms and parameters;
// missing parameters; counts below 1 or above 2^53; a local_share that is not a whole
// number from 1 to 10000, set without on_error = "local", on a rule whose limit cannot be
// shared or whose shared parameters leave the exact range (an error), and one above a
// rule's limit, or whose share is below a constant cost (a warning); durations and periods below 1ms;
// parameter combinations beyond an algorithm's exact-arithmetic range (checked for every
// entry of a lookup table); a constant cost above the rule's capacity (an error: such a
// request can never pass) and a cost that may exceed it (a warning); keys and shards that
// can be empty unless a when or match proves the attribute non-empty; rules and policies
// whose condition is constantly false; a shard that splits a rule's counters; duplicate
// names; plugin commands that are forbidden (TIME, KEYS, FLUSHALL, ... : the reason is
// given) or that luahost does not implement (1), with a did-you-mean and the list of the
// available ones; plugin Lua that does not compile, assigns globals or engine locals, calls
// commands it does not declare, or lacks params, check or commit; a rule whose worst case
// on Redis passes its policy's [Budget] (a warning that gives the figures: see
// [Rule.Work]), and a plugin without a work block (a warning); scenarios naming
// unknown policies, traffic or rules; faults of unknown kinds, outside the scenario's
// duration or overlapping one another; and numbers beyond a float64's range, refused before
// evaluation because HCL takes minutes to print one exactly (at run time, a request
// attribute holding such a number is refused by the expressions that would convert it).
//
// (1) A plugin runs on Redis and, under verify and simulate, in the embedded backend and
// in the local fallback, on luahost; so it may list only commands luahost implements
// (luahost.Commands), less the forbidden ones. A plugin that loads runs on both.
package dsl
