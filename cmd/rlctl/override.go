package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/engine"
)

var cmdOverride = &command{
	name:  "override",
	args:  "set|get|clear|list -redis ADDR [-redis-type TYPE] [-rule POLICY.RULE] [-attr NAME=VALUE]... [-set NAME=VALUE]... [-for D | -until TIME] FILE|DIR...",
	short: "set, read, clear or list per-key overrides of a policy's rules on a Redis",
	long: `Override gives one key of an overridable rule (overridable = true) other figures on the
Redis the engine decides on, or reads, clears or lists them. The key is the one the rule
has for the request whose attributes -attr gives, as the policies in the files render it;
decisions read the override in the same script call, so every instance sees a change at
its next decision. See docs/runtime.md for what a change does to what the key counted.

  rlctl override set   -redis ADDR -rule POLICY.RULE -attr NAME=VALUE... -set NAME=VALUE... [-for D | -until TIME] FILE|DIR...
  rlctl override get   -redis ADDR -rule POLICY.RULE -attr NAME=VALUE... FILE|DIR...
  rlctl override clear -redis ADDR -rule POLICY.RULE -attr NAME=VALUE... FILE|DIR...
  rlctl override list  -redis ADDR FILE|DIR...

Flags:
  -redis ADDR       host:port (port 6379 when left out), redis://[user:password@]host:port[/db],
                    rediss://... (TLS), or a Unix socket: unix:///path or the path itself
  -redis-type TYPE  single (default) or cluster: a Redis Cluster, whose nodes the client
                    finds from ADDR (one of them)
  -rule POLICY.RULE the overridable rule
  -attr NAME=VALUE  request.NAME of the request whose key it is (repeatable)
  -set NAME=VALUE   a parameter of the rule's algorithm and its value as a policy writes
                    it: -set rate=100/s -set burst=200 (repeatable; the others keep the
                    rule's)
  -for D            the override ends D from now (set only)
  -until TIME       the override ends at TIME, RFC 3339 (set only)

list scans the server (SCAN, 1000 keys a step, at most 100000 overrides) for the
overrides of the files' overridable rules and prints one per line: the rule, the key, the
figures in force and when they end.

Exit status: 0 done, 1 invalid policies, an unreachable Redis, or an override the rule
cannot take (said why), 2 usage error.
`,
	run: runOverride,
}

// overrideListMax bounds what list prints and scans for.
const overrideListMax = 100_000

func runOverride(e *env, args []string) error {
	fs := flags("override")
	addr := fs.String("redis", "", "")
	redisType := fs.String("redis-type", "single", "")
	ruleRef := fs.String("rule", "", "")
	attrs, set := benchAttrs{}, benchAttrs{}
	fs.Var(attrs, "attr", "")
	fs.Var(set, "set", "")
	forD := fs.Duration("for", 0, "")
	untilS := fs.String("until", "", "")
	op, err := subcommand(e, fs, "override", args, "set", "get", "clear", "list")
	if err != nil {
		return err
	}
	bad := func(format string, a ...any) error { return usageError(e, format, a...) }
	policy, rule, hasRule := strings.Cut(*ruleRef, ".")
	switch {
	case fs.NArg() == 0:
		return errUsage
	case *addr == "":
		return bad("-redis is required: the Redis the engine decides on, such as 127.0.0.1:6379")
	case op != "list" && (!hasRule || policy == "" || rule == ""):
		return bad("-rule POLICY.RULE is required, such as -rule api.per_user")
	case op == "set" && len(set) == 0:
		return bad("set needs -set NAME=VALUE for at least one of the rule's parameters, such as -set rate=100/s")
	case op != "set" && (len(set) > 0 || *forD != 0 || *untilS != ""):
		return bad("-set, -for and -until belong to override set")
	case *forD < 0:
		return bad("-for %v is not positive", *forD)
	case *forD != 0 && *untilS != "":
		return bad("give -for or -until, not both")
	}
	var until time.Time
	if *untilS != "" {
		var err error
		if until, err = time.Parse(time.RFC3339Nano, *untilS); err != nil {
			return bad("-until %q is not an RFC 3339 time, such as 2026-12-31T23:59:59Z", *untilS)
		}
	}
	if *forD > 0 {
		until = time.Now().Add(*forD)
	}
	re, err := openRedisEngine(e, *addr, *redisType, fs.Args())
	if err != nil {
		return err
	}
	defer re.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := re.ping(ctx); err != nil {
		return err
	}
	if op == "list" {
		return overrideList(ctx, e, re)
	}
	eng := re.eng
	r := engine.Attrs(attrs)
	switch op {
	case "set":
		if err := eng.SetOverride(ctx, r, policy, rule, set, until); err != nil {
			return err
		}
	case "clear":
		if err := eng.ClearOverride(ctx, r, policy, rule); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "cleared: %s.%s\n", policy, rule)
		return nil
	}
	o, err := eng.Override(ctx, r, policy, rule)
	if err != nil {
		return err
	}
	if o == nil {
		fmt.Fprintf(e.stdout, "%s.%s: no override; the rule's own figures\n", policy, rule)
		return nil
	}
	fmt.Fprintln(e.stdout, formatOverride(o.Policy+"."+o.Rule, o.Key, o.Figures, o.Own, o.Until))
	return nil
}

// formatOverride is one override as override get, set and list print it.
func formatOverride(rule, key, figures, own string, until time.Time) string {
	ends := "until cleared"
	if !until.IsZero() {
		ends = "until " + until.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s  key %s: %s (the rule's own: %s), %s", rule, key, figures, own, ends)
}

// overrideList prints the overrides on the server of the plan's overridable rules.
func overrideList(ctx context.Context, e *env, re *redisEngine) error {
	plan := re.plan
	type ruleOf struct {
		name string
		alg  *algorithms.Algorithm
		own  string
	}
	rules := map[string]ruleOf{} // "<policy>:<rule>:<algorithm>:" to the rule
	for _, p := range plan.Policies() {
		for _, ru := range p.Rules {
			if !ru.Overridable {
				continue
			}
			own := "(varies per request)"
			if w, err := ru.Wire(engine.Attrs{}); err == nil {
				own = ru.Algorithm.DescribeParams(w)
			}
			rules[p.Name+":"+ru.Name+":"+ru.Algorithm.Name+":"] = ruleOf{p.Name + "." + ru.Name, ru.Algorithm, own}
		}
	}
	if len(rules) == 0 {
		fmt.Fprintln(e.stderr, "rlctl: the files have no overridable rule (overridable = true)")
		return nil
	}
	var lines []string
	err := re.scan(ctx, "rl:*:!ovr", func(k string) bool {
		rk, _ := algorithms.RuleKeyOfOverride(k)
		// rl:{p:r:alg:key} or rl:{shard}:{p:r:alg:key}
		i := strings.LastIndex(rk, "{")
		if i < 0 || !strings.HasSuffix(rk, "}") {
			return true
		}
		id := rk[i+1 : len(rk)-1]
		for prefix, ru := range rules {
			if !strings.HasPrefix(id, prefix) {
				continue
			}
			v, err := re.rdb.Get(ctx, k).Result()
			if err != nil {
				continue // cleared meanwhile
			}
			o, err := algorithms.DecodeOverride(ru.alg, v)
			if err != nil {
				lines = append(lines, fmt.Sprintf("%s  key %s: malformed: %v", ru.name, rk, err))
				continue
			}
			var until time.Time
			if o.Until > 0 {
				until = time.UnixMicro(o.Until)
			}
			lines = append(lines, formatOverride(ru.name, rk, ru.alg.DescribeParams(o.Params), ru.own, until))
		}
		return len(lines) < overrideListMax
	})
	if err != nil {
		return err
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(e.stdout, l)
	}
	fmt.Fprintf(e.stderr, "rlctl: %d override(s)\n", len(lines))
	return nil
}
