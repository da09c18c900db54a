package luahost_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/luahost"
)

// zsetBattery fills KEYS[1] with ARGV[1] members (scores with ties and -0s, inserted out
// of order), then runs every sorted-set read and delete on it and returns what each
// answered.
const zsetBattery = `
local k, n, out = KEYS[1], tonumber(ARGV[1]), {}
local function add(...) out[#out + 1] = ... end
for i = n, 1, -1 do
  local s = (i % 7) - 3
  if i % 11 == 0 then s = -0.0 end
  redis.call('ZADD', k, s, 'm' .. i)
end
add(redis.call('ZCARD', k))
add(redis.call('ZRANGE', k, 0, -1, 'WITHSCORES'))
add(redis.call('ZRANGE', k, -3, -1))
add(redis.call('ZREVRANGE', k, 0, 4, 'WITHSCORES'))
add(redis.call('ZRANGEBYSCORE', k, '(-1', 2, 'WITHSCORES', 'LIMIT', 2, 5))
add(redis.call('ZREVRANGEBYSCORE', k, '+inf', '(0', 'LIMIT', 1, 3))
add(redis.call('ZRANGEBYSCORE', k, 10, 20))
add(redis.call('ZRANGE', k, '(-2', 1, 'BYSCORE', 'REV', 'LIMIT', 0, 4))
add(redis.call('ZCOUNT', k, -1, 1))
add(redis.call('ZCOUNT', k, '(3', '+inf'))
add({redis.call('ZRANK', k, 'm1'), redis.call('ZREVRANK', k, 'm' .. n), redis.call('ZRANK', k, 'nope')})
add({redis.call('ZSCORE', k, 'm11'), redis.call('ZSCORE', k, 'm' .. n)})
add(redis.call('ZMSCORE', k, 'm2', 'nope', 'm3'))
add(redis.call('ZINCRBY', k, 2.5, 'm2'))
add(redis.call('ZADD', k, 'XX', 'CH', 9, 'm3', 9, 'nope'))
add(redis.call('ZADD', k, 'GT', 'CH', -9, 'm4'))
add(redis.call('ZREM', k, 'm5', 'nope', 'm6'))
add(redis.call('ZREMRANGEBYSCORE', k, '(-3', '(-1'))
add(redis.call('ZREMRANGEBYRANK', k, 1, 2))
add(redis.call('ZPOPMIN', k, 2))
add(redis.call('ZPOPMAX', k, 2))
add(redis.call('ZRANGE', k, 0, -1, 'WITHSCORES'))
add(redis.call('ZREMRANGEBYRANK', k, 0, -1))
add(redis.call('EXISTS', k))
return out
`

// hashBattery fills KEYS[1] with ARGV[1] fields of values ARGV[2] bytes long, and runs
// the hash commands on it. Fields beyond 128 are never listed: Redis lists a hash that
// big in its dict's order, the host in insertion order.
const hashBattery = `
local k, n, vlen, out = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), {}
local function add(...) out[#out + 1] = ... end
local v = string.rep('v', vlen)
for i = 1, n do redis.call('HSET', k, 'f' .. i, v .. i) end
add(redis.call('HLEN', k))
if n <= 128 and vlen <= 60 then add(redis.call('HGETALL', k)) end
add(redis.call('HMGET', k, 'f1', 'f' .. n, 'nope'))
add(redis.call('HSTRLEN', k, 'f1'))
add(redis.call('HEXISTS', k, 'f2'))
add(redis.call('HSET', k, 'f1', 'x', 'new', 'y', 'new', 'z'))
add(redis.call('HINCRBY', k, 'n', 5))
add(redis.call('HINCRBYFLOAT', k, 'fl', '1.5'))
add(redis.call('HSETNX', k, 'f2', 'no'))
add(redis.call('HDEL', k, 'f2', 'nope', 'f3'))
add(redis.call('HLEN', k))
add(redis.call('HMGET', k, 'f1', 'new', 'n', 'fl', 'f2'))
if n <= 3 then add(redis.call('HGETALL', k)) end
for i = 1, n do redis.call('HDEL', k, 'f' .. i) end
add(redis.call('HDEL', k, 'new', 'n', 'fl'))
add(redis.call('EXISTS', k))
return out
`

// encodingCases run commands across the bounds where Redis (and the host) change a
// value's encoding: 128 elements, and elements of 64 bytes.
func encodingCases() []scriptCase {
	long := func(n int) string { return strings.Repeat("x", n) }
	var cases []scriptCase
	for _, n := range []string{"1", "5", "127", "128", "129", "300"} {
		cases = append(cases, scriptCase{name: "zset battery n=" + n, src: zsetBattery, keys: 1, args: []string{n}})
	}
	for _, c := range [][2]string{{"1", "1"}, {"3", "60"}, {"128", "1"}, {"129", "1"}, {"5", "64"}, {"5", "65"}, {"200", "70"}} {
		cases = append(cases, scriptCase{name: "hash battery n=" + c[0] + " len=" + c[1], src: hashBattery, keys: 1, args: c[:]})
	}
	return append(cases,
		scriptCase{name: "zset -0 packed", keys: 1, src: `redis.call('ZADD', KEYS[1], -0.0, 'a') return redis.call('ZSCORE', KEYS[1], 'a')`},
		scriptCase{name: "zset -0 after 128 members", keys: 1, src: `
for i = 1, 128 do redis.call('ZADD', KEYS[1], -0.0, 'm' .. i) end
redis.call('ZADD', KEYS[1], -0.0, 'neg')
return {redis.call('ZSCORE', KEYS[1], 'm1'), redis.call('ZSCORE', KEYS[1], 'neg'), redis.call('ZRANGE', KEYS[1], 0, 1, 'WITHSCORES')}`},
		scriptCase{name: "zset first member of 65 bytes", keys: 1, args: []string{long(65)}, src: `
redis.call('ZADD', KEYS[1], -0.0, ARGV[1], -0.0, 'b')
return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')`},
		scriptCase{name: "zset member of 64 bytes then 65", keys: 1, args: []string{long(64), long(65)}, src: `
redis.call('ZADD', KEYS[1], -0.0, ARGV[1])
local a = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], -0.0, ARGV[2])
return {a, redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}`},
		scriptCase{name: "zset 65-byte member second in one ZADD", keys: 1, args: []string{long(65)}, src: `
redis.call('ZADD', KEYS[1], -0.0, 'a', -0.0, ARGV[1])
return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')`},
		scriptCase{name: "zset update moves member", keys: 1, src: `
redis.call('ZADD', KEYS[1], 1, 'a', 2, 'b', 3, 'c', 2, 'bb')
redis.call('ZADD', KEYS[1], 5, 'a', 2, 'b')
return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')`},
		scriptCase{name: "hash replace keeps place", keys: 1, src: `
redis.call('HSET', KEYS[1], 'a', 1, 'b', 2, 'c', 3)
redis.call('HSET', KEYS[1], 'b', 20)
redis.call('HDEL', KEYS[1], 'a')
redis.call('HSET', KEYS[1], 'a', 10)
return redis.call('HGETALL', KEYS[1])`},
		scriptCase{name: "hset repeats a field", keys: 1, src: `
return {redis.call('HSET', KEYS[1], 'f', 1, 'f', 2, 'g', 3, 'f', 4), redis.call('HGETALL', KEYS[1])}`},
		scriptCase{name: "hash empty field and value", keys: 1, src: `
return {redis.call('HSET', KEYS[1], '', '', 'x', ''), redis.call('HGETALL', KEYS[1]), redis.call('HSTRLEN', KEYS[1], '')}`},
		scriptCase{name: "hincrbyfloat past 64 bytes", keys: 1, src: `
redis.call('HSET', KEYS[1], 'a', 1)
return {redis.call('HINCRBYFLOAT', KEYS[1], 'fl', '1e70'), redis.call('HMGET', KEYS[1], 'a', 'fl'), redis.call('HLEN', KEYS[1])}`},
		scriptCase{name: "set over a packed hash", keys: 1, src: `
redis.call('HSET', KEYS[1], 'a', 1)
redis.call('SET', KEYS[1], 'v')
return {redis.call('TYPE', KEYS[1]), redis.call('GET', KEYS[1])}`},
	)
}

// TestEncodingsMatchRedis runs the encoding-boundary cases on the real server and on the
// host, and requires identical replies.
func TestEncodingsMatchRedis(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	host := luahost.New()
	prefix := keyPrefix(t)
	ctx := context.Background()
	for i, tc := range encodingCases() {
		t.Run(tc.name, func(t *testing.T) {
			keys := make([]string, tc.keys)
			for k := range keys {
				keys[k] = fmt.Sprintf("%s:%d:%d", prefix, i, k)
			}
			args := make([]any, len(tc.args))
			for k, a := range tc.args {
				args[k] = a
			}
			want := canon(rdb.Eval(ctx, tc.src, keys, args...).Result())
			got := canon(host.Eval(ctx, tc.src, keys, tc.args))
			if got != want {
				t.Errorf("redis:   %s\nluahost: %s", want, got)
			}
		})
	}
}
