package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/cli"
)

var cmdList = &command{
	name:  "list",
	args:  "add|remove|get|show -redis ADDR [-redis-type TYPE] [-list NAME] [-attr NAME=VALUE]... FILE|DIR...",
	short: "put a request's keys on a runtime list on a Redis, take them off, read or show them",
	long: `List changes the runtime lists of the policies' rules (exempt = list("NAME"), deny =
list("NAME")) on the Redis the engine decides on, or reads or shows them. A key on a
rule's exempt list is not limited by the rule; a key on its deny list is refused, with
deny_retry as its retry-after. The keys are the ones every rule naming the list has for
the request whose attributes -attr gives, as the policies in the files render them,
whether or not the policy's match and the rule's when hold for it; decisions read the
list in the same script call, so every instance sees a change at its next decision. A
member has no expiry: it stays until removed.

  rlctl list add    -redis ADDR -list NAME -attr NAME=VALUE... FILE|DIR...
  rlctl list remove -redis ADDR -list NAME -attr NAME=VALUE... FILE|DIR...
  rlctl list get    -redis ADDR -list NAME -attr NAME=VALUE... FILE|DIR...
  rlctl list show   -redis ADDR [-list NAME] FILE|DIR...

Flags:
  -redis ADDR       host:port (port 6379 when left out), redis://[user:password@]host:port[/db],
                    rediss://... (TLS), or a Unix socket: unix:///path or the path itself
  -redis-type TYPE  single (default) or cluster: a Redis Cluster, whose nodes the client
                    finds from ADDR (one of them)
  -list NAME        the list, as a rule names it
  -attr NAME=VALUE  request.NAME of the request whose keys they are (repeatable; give the
                    attributes the rules' keys read)

add, remove and get print one line per rule naming the list: the rule, its key for the
request, and whether the key is on the list after the call.

show scans the server (SCAN, 1000 keys a step, at most 100000 members) for the members
of the lists the files' rules name (with -list, of that list only) and prints one per
line: the list and the rule's key.

Exit status: 0 done, 1 invalid policies, an unreachable Redis, or a list no rule of the
files names (said why), 2 usage error.
`,
	run: runList,
}

// listShowMax bounds what list show prints and scans for.
const listShowMax = 100_000

func runList(e *env, args []string) error {
	fs := flags("list")
	addr := fs.String("redis", "", "")
	redisType := fs.String("redis-type", "single", "")
	name := fs.String("list", "", "")
	attrs := benchAttrs{}
	fs.Var(attrs, "attr", "")
	op, err := subcommand(e, fs, "list", args, "add", "remove", "get", "show")
	if err != nil {
		return err
	}
	bad := func(format string, a ...any) error { return usageError(e, format, a...) }
	switch {
	case fs.NArg() == 0:
		return errUsage
	case *addr == "":
		return bad("-redis is required: the Redis the engine decides on, such as 127.0.0.1:6379")
	case op != "show" && *name == "":
		return bad("-list NAME is required, such as -list banned")
	case op != "show" && len(attrs) == 0:
		return bad("%s needs -attr NAME=VALUE for the attributes the rules' keys read, such as -attr ip=192.0.2.1", op)
	case op == "show" && len(attrs) > 0:
		return bad("-attr belongs to list add, remove and get")
	}
	re, err := openRedisEngine(e, *addr, *redisType, fs.Args())
	if err != nil {
		return err
	}
	defer re.Close()
	lists := re.eng.Lists()
	if *name != "" && !slices.Contains(lists, *name) {
		return noList(*name, lists)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := re.ping(ctx); err != nil {
		return err
	}
	plan, eng := re.plan, re.eng
	var members []engine.ListMember
	r := engine.Attrs(attrs)
	switch op {
	case "show":
		return listShow(ctx, e, re, plan, lists, *name)
	case "add":
		members, err = eng.AddToList(ctx, *name, r)
	case "remove":
		members, err = eng.RemoveFromList(ctx, *name, r)
	case "get":
		members, err = eng.InList(ctx, *name, r)
	}
	// On an error, the calls before it were made: print what they did, then the error.
	for _, m := range members {
		on := "on "
		if !m.Member {
			on = "not on "
		}
		fmt.Fprintf(e.stdout, "%s.%s  key %s: %s%s\n", m.Policy, m.Rule, m.Key, on, *name)
	}
	return err
}

// noList is the error for a list that no rule of the files names; lists are those they
// name.
func noList(name string, lists []string) error {
	err := &cli.Error{Msg: fmt.Sprintf("no rule of the files names the list %q (exempt or deny = list(%q))", name, name)}
	if len(lists) > 0 {
		err.Hint = "the lists the rules name are " + strings.Join(lists, ", ")
	} else {
		err.Hint = `add exempt = list("NAME") or deny = list("NAME") to a rule`
	}
	return err
}

// listShow prints the members on the server of lists, the lists the plan's rules name,
// or of the list only when it is not "".
func listShow(ctx context.Context, e *env, re *redisEngine, plan *engine.Plan, lists []string, only string) error {
	if only != "" {
		lists = []string{only}
	}
	names := map[string][]string{} // "<policy>:<rule>:<algorithm>:" to the lists the rule names
	for _, p := range plan.Policies() {
		for _, ru := range p.Rules {
			prefix := p.Name + ":" + ru.Name + ":" + engine.AlgorithmTag(ru.Algorithm) + ":"
			for _, n := range []string{ru.Lists.Exempt, ru.Lists.Deny} {
				if n != "" && slices.Contains(lists, n) {
					names[prefix] = append(names[prefix], n)
				}
			}
		}
	}
	if len(names) == 0 {
		fmt.Fprintln(e.stderr, `rlctl: no rule of the files names a list (exempt = list("NAME") or deny = list("NAME"))`)
		return nil
	}
	match := "*"
	if only != "" {
		match = only // a list name has no glob characters
	}
	var lines []string
	err := re.scan(ctx, algorithms.ListKey("rl:*", match), func(k string) bool {
		for _, n := range lists {
			rk, ok := strings.CutSuffix(k, algorithms.ListKey("", n))
			// rl:{p:r:alg:key} or rl:{shard}:{p:r:alg:key}
			i := strings.LastIndex(rk, "{")
			if !ok || i < 0 || !strings.HasSuffix(rk, "}") {
				continue
			}
			id := rk[i+1 : len(rk)-1]
			for prefix, ns := range names {
				if strings.HasPrefix(id, prefix) && slices.Contains(ns, n) {
					lines = append(lines, n+"  "+rk)
				}
			}
		}
		return len(lines) < listShowMax
	})
	if err != nil {
		return err
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(e.stdout, l)
	}
	fmt.Fprintf(e.stderr, "rlctl: %d member(s)\n", len(lines))
	return nil
}
