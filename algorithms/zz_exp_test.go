package algorithms

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

const zzLib = `#!lua name=zz
local call
local function ttl_ms(us)
  local x = us + 999
  local q = x / 1000
  q = q - q % 1
  return q + 1
end
local function g(KEYS, ARGV)
  call = redis.call
  local t = call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local key = KEYS[1]
  local cost = tonumber(ARGV[8])
  local v = redis.pcall('GET', key)
  local d = 0
  if type(v) == 'string' then
    local tat = tonumber(v)
    if tat and tat >= now then d = tat - now end
  end
  local d2 = d + cost * 100000
  if d2 <= 10000000 then
    call('SET', key, now + d2, 'PX', ttl_ms(d2))
    local q = (10000000 - d2) / 100000
    return {1, 0, now, now, 1, q - q % 1, 0, d2, 100}
  end
  return {0, 1, now, now, 0, 0, d2 - 10000000, d, 100}
end
redis.register_function('zz', g)
`

func BenchmarkZZ(b *testing.B) {
	clock := luahost.NewManualClock(time.Unix(1_800_000_000, 0))
	h := luahost.New(luahost.WithClock(clock), luahost.WithInstructionLimit(1<<40))
	if _, err := h.FunctionLoad(zzLib, true); err != nil {
		b.Fatal(err)
	}
	keys := make([][]string, 1000)
	for i := range keys {
		keys[i] = []string{fmt.Sprintf("bench:0:%d", i)}
	}
	argv := []string{"4", "check", "", "", "", "1", "@1", "1"}
	ctx := context.Background()
	b.ReportAllocs()
	var steps uint64
	for i := 0; b.Loop(); i++ {
		clock.Advance(time.Millisecond)
		if _, err := h.FCall(ctx, "zz", keys[i%1000], argv); err != nil {
			b.Fatal(err)
		}
		steps += h.Steps()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(steps)/float64(b.N), "lua-steps/op")
}
