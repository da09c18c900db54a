package luahost_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

// benchScript is the shape of a rate-limit decision: read state, write it
// back, refresh the TTL.
const benchScript = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local state = redis.call('HMGET', key, 'tokens', 't')
local tokens = tonumber(state[1]) or 100
local t = tonumber(state[2]) or now
tokens = math.min(100, tokens + (now - t) / 1000)
if tokens >= 1 then tokens = tokens - 1 end
redis.call('HSET', key, 'tokens', tokens, 't', now)
redis.call('PEXPIRE', key, 60000)
return {1, math.floor(tokens)}
`

// BenchmarkEvalSHA measures one small script call (HMGET + HSET + PEXPIRE
// on one key) with the default deadline, without any deadline, and under a
// cancellable context.
func BenchmarkEvalSHA(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []luahost.Option
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{name: "deadline=default", opts: nil},
		{name: "deadline=none", opts: []luahost.Option{luahost.WithTimeout(0)}},
		{name: "deadline=none/ctx=cancelable", opts: []luahost.Option{luahost.WithTimeout(0)},
			ctx: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			clock := luahost.NewManualClock(time.Unix(1764472786, 0))
			h := luahost.New(append([]luahost.Option{luahost.WithClock(clock)}, bc.opts...)...)
			sha, err := h.Load(benchScript)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if bc.ctx != nil {
				var cancel context.CancelFunc
				ctx, cancel = bc.ctx()
				defer cancel()
			}
			keys := []string{"bench:key"}
			args := []string{"1764472786000"}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := h.EvalSHA(ctx, sha, keys, args); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// BenchmarkDo measures one command run directly against the keyspace.
func BenchmarkDo(b *testing.B) {
	h := luahost.New()
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := h.Do(ctx, "HSET", "k", "f", "1"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSlidingLog measures a sliding-log style script on a sorted set
// of 10k members: trim by score, count, add.
func BenchmarkSlidingLog(b *testing.B) {
	const script = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 10000)
local n = redis.call('ZCARD', KEYS[1])
redis.call('ZADD', KEYS[1], now, ARGV[1])
return n
`
	h := luahost.New(luahost.WithTimeout(0))
	sha, err := h.Load(script)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	keys := []string{"log"}
	now := int64(1e9)
	for i := 0; i < 10000; i++ {
		now++
		if _, err := h.EvalSHA(ctx, sha, keys, []string{itoa(now)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now++
		if _, err := h.EvalSHA(ctx, sha, keys, []string{itoa(now)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListLog measures a list-based log capped at 1000 entries: push,
// trim, length.
func BenchmarkListLog(b *testing.B) {
	const script = `
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, 999)
return redis.call('LLEN', KEYS[1])
`
	h := luahost.New(luahost.WithTimeout(0))
	sha, err := h.Load(script)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	keys := []string{"log"}
	for i := 0; i < 1000; i++ {
		if _, err := h.EvalSHA(ctx, sha, keys, []string{itoa(int64(i))}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.EvalSHA(ctx, sha, keys, []string{"1764472786000000"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIncrbyfloat measures INCRBYFLOAT, which adds in C's long double.
func BenchmarkIncrbyfloat(b *testing.B) {
	h := luahost.New()
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := h.Do(ctx, "INCRBYFLOAT", "k", "0.25"); err != nil {
			b.Fatal(err)
		}
	}
}
