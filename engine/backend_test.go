package engine

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the failure tests kill servers on purpose.
	redis.SetLogger(quietLogger{})
	os.Exit(redistest.Main(m))
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// gcraCall is a request to a gcra rule of 10 per hour with a burst of 10: a cell comes
// back only after 6 minutes, so no real-time delay between calls changes a reply.
func gcraCall(key string, now int64) *algorithms.Call {
	g, _ := algorithms.Lookup("gcra")
	return &algorithms.Call{Op: algorithms.OpCheck, Now: now, Rules: []algorithms.Rule{
		{Key: key, Algorithm: g, Cost: 1, Params: []int64{10, 3_600_000_000, 10}},
	}}
}

func evalCall(t *testing.T, b Backend, c *algorithms.Call) algorithms.Reply {
	t.Helper()
	argv, err := c.Argv()
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.Eval(context.Background(), algorithms.Default(), c.Keys(), argv)
	if err != nil {
		t.Fatalf("Eval: %v", err)
	}
	r, err := algorithms.DecodeReply(v, len(c.Rules))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRedisReloadsAfterScriptFlush: the first call loads the script (NOSCRIPT on a fresh
// server), and after SCRIPT FLUSH the next call still succeeds.
func TestRedisReloadsAfterScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	b := NewRedis(rdb)
	ctx := context.Background()
	if r := evalCall(t, b, gcraCall("noscript", algorithms.ServerTime)); !r.Allowed {
		t.Fatalf("first call denied: %+v", r)
	}
	for i := range 3 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, _ := rdb.ScriptExists(ctx, algorithms.Default().SHA1).Result(); ok[0] {
			t.Fatal("SCRIPT FLUSH left the script loaded")
		}
		r := evalCall(t, b, gcraCall("noscript", algorithms.ServerTime))
		if r.Rules[0].Remaining != int64(8-i) {
			t.Fatalf("after flush %d: remaining %d, want %d (state survives, script reloads)", i+1, r.Rules[0].Remaining, 8-i)
		}
	}
}

// TestLocalReloadsAfterScriptFlush: the same contract on luahost.
func TestLocalReloadsAfterScriptFlush(t *testing.T) {
	clock := luahost.NewManualClock(time.Unix(1_800_000_000, 0))
	h := luahost.New(luahost.WithClock(clock))
	b := NewLocal(h)
	evalCall(t, b, gcraCall("noscript", algorithms.ServerTime))
	h.FlushScripts()
	if r := evalCall(t, b, gcraCall("noscript", algorithms.ServerTime)); r.Rules[0].Remaining != 8 {
		t.Fatalf("after flush: %+v", r)
	}
}
