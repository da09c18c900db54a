package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/internal/redistest"
)

// listPolicy limits addresses and users; partners' users are exempt from per_user, and
// banned addresses are refused by per_ip for ten minutes at a time.
const listPolicy = `
policy "api" {
  clock = "client"
  match = startswith(request.path, "/v1/")
  rule "per_ip" {
    algorithm  = "gcra"
    key        = request.ip
    when       = request.ip != ""
    rate       = "1/h"
    burst      = 3
    deny       = list("banned")
    deny_retry = "10m"
  }
  rule "per_user" {
    algorithm = "fixed_window"
    key       = request.user
    when      = request.user != ""
    limit     = 2
    window    = "1h"
    exempt    = list("partners")
  }
}
`

// TestLists: a key on a deny list is refused at its next decision with the list's retry,
// uncharged; a key on an exempt list passes its rule uncharged; removal restores the rule;
// membership is read per rule; a list no rule names is an error. On both backends.
func TestLists(t *testing.T) {
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, listPolicy), WithClock(clock.now), WithDenyCache(64))
			ctx := context.Background()
			req := Attrs{"path": "/v1/x", "ip": "192.0.2.1", "user": "acme"}
			decide := func(step string, allowed bool, ipRemaining, userRemaining int64, retry time.Duration) {
				t.Helper()
				d, err := e.Allow(ctx, req)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if d.Allowed != allowed || d.Rules[0].Remaining != ipRemaining || d.Rules[1].Remaining != userRemaining || d.RetryAfter != retry {
					t.Fatalf("%s: allowed %v remaining %d/%d retry-after %v; want %v %d/%d %v", step, d.Allowed, d.Rules[0].Remaining, d.Rules[1].Remaining, d.RetryAfter, allowed, ipRemaining, userRemaining, retry)
				}
			}
			decide("first", true, 2, 1, 0)

			// Exempt: per_user charges nothing and allows past its limit; per_ip still counts.
			m, err := e.AddToList(ctx, "partners", Attrs{"user": "acme"})
			if err != nil || len(m) != 1 || m[0].Rule != "per_user" || !m[0].Member || !strings.Contains(m[0].Key, "{api:per_user:fixed_window:acme}") {
				t.Fatalf("add to partners: %+v %v", m, err)
			}
			decide("exempt", true, 1, 1, 0)
			decide("exempt again", true, 0, 1, 0)
			if m, err := e.RemoveFromList(ctx, "partners", Attrs{"user": "acme"}); err != nil || m[0].Member {
				t.Fatalf("remove from partners: %+v %v", m, err)
			}

			// Deny: refused by per_ip with the list's retry (the rule's own, an hour, is
			// longer here: it wins), uncharged, even where the rule alone would allow.
			clock.advance(3 * time.Hour) // per_ip has its burst back
			if _, err := e.AddToList(ctx, "banned", Attrs{"ip": "192.0.2.1"}); err != nil {
				t.Fatal(err)
			}
			decide("banned", false, 0, 2, 10*time.Minute) // per_user's window has turned too
			// Again: from the deny cache (which answers with the deciding rule only).
			if d, err := e.Allow(ctx, req); err != nil || d.Allowed || d.RetryAfter != 10*time.Minute {
				t.Fatalf("banned again: %+v %v", d, err)
			}
			if m, err := e.InList(ctx, "banned", Attrs{"ip": "192.0.2.1"}); err != nil || len(m) != 1 || !m[0].Member {
				t.Fatalf("in banned: %+v %v", m, err)
			}
			if m, err := e.InList(ctx, "banned", Attrs{"ip": "192.0.2.2"}); err != nil || m[0].Member {
				t.Fatalf("another address in banned: %+v %v", m, err)
			}
			if _, err := e.RemoveFromList(ctx, "banned", Attrs{"ip": "192.0.2.1"}); err != nil {
				t.Fatal(err)
			}
			// Removed: this engine's deny cache forgot the key; the rule decides alone, and
			// the banned requests were not charged.
			decide("unbanned", true, 2, 1, 0)

			if _, err := e.AddToList(ctx, "vips", Attrs{"user": "acme"}); !errors.Is(err, ErrNoList) {
				t.Fatalf("a list no rule names: %v", err)
			}
			if got := strings.Join(e.Lists(), ","); got != "banned,partners" {
				t.Fatalf("Lists() = %s", got)
			}
		})
	}
}

// TestListsOnACluster: list members live in their rule key's slot on a real 3-node
// cluster, in a sharded policy and not, so one call decides a key and reads its lists,
// and one inspects them.
func TestListsOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	for _, shard := range []string{"", `shard = request.tenant`} {
		src := `
policy "p" {
  ` + shard + `
  rule "a" {
    algorithm = "sliding_window"
    key       = request.user
    limit     = 1
    window    = "1h"
    exempt    = list("staff")
    deny      = list("blocked")
  }
}
`
		e := New(NewRedis(cl.Client(t)), compile(t, src), WithTimeout(time.Minute))
		for _, user := range []string{"u1", "u2", "u3", "u4", "u5"} {
			a := Attrs{"tenant": "t1", "user": user + strings.TrimSpace(shard)}
			if d, err := e.Allow(ctx, a); err != nil || !d.Allowed {
				t.Fatalf("%q %s: 1st: %+v %v", shard, user, d, err)
			}
			m, err := e.AddToList(ctx, "staff", a)
			if err != nil || len(m) != 1 || !m[0].Member || Slot(m[0].Key) != Slot(algorithms.ListKey(m[0].Key, "staff")) {
				t.Fatalf("%q %s: add: %+v %v", shard, user, m, err)
			}
			if d, err := e.Allow(ctx, a); err != nil || !d.Allowed {
				t.Fatalf("%q %s: exempt: %+v %v", shard, user, d, err)
			}
			if in, err := e.Inspect(ctx, a); err != nil || len(in) != 1 || len(in[0].Lists) != 2 || !in[0].Lists[0].Member || in[0].Lists[1].Member {
				t.Fatalf("%q %s: inspect: %+v %v", shard, user, in, err)
			}
			if _, err := e.AddToList(ctx, "blocked", a); err != nil {
				t.Fatal(err)
			}
			if d, err := e.Allow(ctx, a); err != nil || d.Allowed || d.RetryAfter < time.Hour {
				t.Fatalf("%q %s: on both lists: %+v %v, want denied for at least the default hour", shard, user, d, err)
			}
		}
	}
}
