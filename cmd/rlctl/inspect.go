package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/engine"
)

var cmdInspect = &command{
	name:  "inspect",
	args:  "-redis ADDR [-redis-type TYPE] -attr NAME=VALUE... FILE|DIR...",
	short: "show what each rule sees for a request on a Redis, charging nothing",
	long: `Inspect shows, for every rule of the files' policies that applies to the request whose
attributes -attr gives, what the rule sees on the Redis the engine decides on, charging
nothing: the verdict a request of cost 0 gets (a peek), the penalty box's block running
for the rule's key, the override in force and whether the key is on each of the rule's
lists. An override whose end has come is ended by the read, as a decision would end it.
Each is read atomically, but not all at once: a change made meanwhile may show in one and
not another.

One block per rule, in the order the engine decides them:

  api.per_ip  key rl:{api:per_ip:fixed_window:192.0.2.1}
    denied, remaining 0, retry-after 9m, reset-after 9m, limit 100
    blocked until 2026-12-06T10:09:00Z
    not on banned (deny)
  api.per_user  key rl:{api:per_user:gcra:acme}
    allowed, remaining 50, reset-after 0s, limit 50
    override rate=100/s burst=50 (own rate=10/s burst=10) until cleared
    on partners (exempt)

The second line is the verdict: allowed or denied, the largest cost the rule would allow
now, retry-after (denied only; "never" for a cost that can never fit), reset-after (until
the key is back to empty), the limit, and "shadow" for a rule in shadow mode. The lines
after it show only what the rule has: a block, when one is running; an override, when
one is in force; a line per list the rule names (exempt = list("NAME"), deny =
list("NAME")). Times are UTC, RFC 3339.

Flags:
  -redis ADDR       host:port (port 6379 when left out), redis://[user:password@]host:port[/db],
                    rediss://... (TLS), or a Unix socket: unix:///path or the path itself
  -redis-type TYPE  single (default) or cluster: a Redis Cluster, whose nodes the client
                    finds from ADDR (one of them)
  -attr NAME=VALUE  request.NAME of the request (repeatable, at least one; give the
                    attributes the policies' match, the rules' when and keys read)

Exit status: 0 done (a request no rule applies to says so on stderr), 1 invalid
policies, an unreachable Redis or a request the policies cannot evaluate (said why), 2
usage error.
`,
	run: runInspect,
}

func runInspect(e *env, args []string) error {
	fs := flags("inspect")
	addr := fs.String("redis", "", "")
	redisType := fs.String("redis-type", "single", "")
	attrs := benchAttrs{}
	fs.Var(attrs, "attr", "")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	bad := func(format string, a ...any) error { return usageError(e, format, a...) }
	switch {
	case fs.NArg() == 0:
		return errUsage
	case *addr == "":
		return bad("-redis is required: the Redis the engine decides on, such as 127.0.0.1:6379")
	case len(attrs) == 0:
		return bad("inspect needs -attr NAME=VALUE for the attributes the policies read, such as -attr ip=192.0.2.1")
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
	ins, err := re.eng.Inspect(ctx, engine.Attrs(attrs))
	if err != nil {
		return err
	}
	if len(ins) == 0 {
		fmt.Fprintln(e.stderr, "rlctl: no rule of the files applies to the request")
		return nil
	}
	for _, in := range ins {
		writeInspection(e.stdout, in)
	}
	return nil
}

// writeInspection prints one rule's inspection as rlctl inspect's help shows it.
func writeInspection(w io.Writer, in engine.Inspection) {
	fmt.Fprintf(w, "%s.%s  key %s\n", in.Policy, in.Rule, in.Key)
	dur := func(d time.Duration) string { return algorithms.FormatDuration(d.Microseconds()) }
	v := []string{"allowed"}
	if !in.Allowed {
		v[0] = "denied"
	}
	v = append(v, fmt.Sprintf("remaining %d", in.Remaining))
	switch {
	case in.RetryAfter == engine.Never:
		v = append(v, "retry-after never")
	case !in.Allowed:
		v = append(v, "retry-after "+dur(in.RetryAfter))
	}
	v = append(v, "reset-after "+dur(in.ResetAfter), fmt.Sprintf("limit %d", in.Limit))
	if in.Shadow {
		v = append(v, "shadow")
	}
	fmt.Fprintf(w, "  %s\n", strings.Join(v, ", "))
	if !in.BlockedUntil.IsZero() {
		fmt.Fprintf(w, "  blocked until %s\n", in.BlockedUntil.UTC().Format(time.RFC3339))
	}
	if o := in.Override; o != nil {
		ends := "until cleared"
		if !o.Until.IsZero() {
			ends = "until " + o.Until.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "  override %s (own %s) %s\n", o.Figures, o.Own, ends)
	}
	for _, l := range in.Lists {
		on, kind := "on ", "exempt"
		if !l.Member {
			on = "not on "
		}
		if l.Deny {
			kind = "deny"
		}
		fmt.Fprintf(w, "  %s%s (%s)\n", on, l.List, kind)
	}
}
