package luahost

// redisRand is Redis's rand.c: the 48-bit linear congruential generator of
// POSIX lrand48, which Redis 7.0 uses for Lua's math.random so that every
// platform yields the same sequence. Its state starts at the POSIX default
// and is never reseeded between scripts (math.randomseed persists too), as
// in a freshly started Redis 7.0 server.
type redisRand struct{ x uint64 }

const (
	rand48Mask    = 1<<48 - 1
	rand48Initial = 0x1234ABCD330E
	rand48Max     = 2147483647 // REDIS_LRAND48_MAX
)

func newRedisRand() redisRand { return redisRand{x: rand48Initial} }

// next returns the next 31-bit value (redisLrand48).
func (r *redisRand) next() int32 {
	r.x = (0x5DEECE66D*r.x + 0xB) & rand48Mask
	return int32(r.x >> 17)
}

// seed is redisSrand48.
func (r *redisRand) seed(s int32) {
	r.x = uint64(uint32(s))<<16 | 0x330E
}

// float returns a number in [0, 1) as Redis's math.random computes it.
func (r *redisRand) float() float64 {
	return float64(r.next()%rand48Max) / rand48Max
}
