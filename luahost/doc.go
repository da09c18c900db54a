// Package luahost runs Redis Lua scripts in process, as Redis 7.0 runs them.
//
// A Host is a gopher-lua VM set up with Redis's Lua environment, an
// in-memory keyspace and an injectable Clock. The same script that rlctl
// sends to Redis with EVALSHA runs here unchanged: in the embedded and
// fail-over modes against the wall clock, and under verify and simulate
// against a ManualClock, where TIME answers the simulated time and TTLs
// expire by it.
//
//	h := luahost.New(luahost.WithClock(luahost.NewManualClock(start)))
//	sha, err := h.Load(script)
//	reply, err := h.EvalSHA(ctx, sha, keys, args)
//
// Redis Functions work as on Redis 7.0: FunctionLoad runs a library's code once, in
// Redis's load sandbox (its only global is a redis table with register_function, log,
// the LOG_* levels and the version), and FCall calls a registered function, whose
// upvalues live as long as its library, so a library instantiates what it needs once
// rather than on every call as EVAL does. Do runs FCALL, FCALL_RO and FUNCTION LOAD,
// DELETE, FLUSH and LIST.
//
//	name, err := h.FunctionLoad(library, true)
//	reply, err := h.FCall(ctx, "myfunc", keys, args)
//
// A script runs under a watch that stops it past the host's deadline, its instruction
// limit or its context; gopher-lua looks at it before every instruction, a fifth of a short
// call's cost. FCallBounded runs a function whose every run is bounded (the engine script
// of built-in algorithms) with the deadline and context checked at each Redis command
// instead.
//
// Replies have the Go types go-redis gives for RESP2: int64, string, nil
// (nil bulk) and []any; status replies are strings; error replies are
// *ErrorReply errors (nested in an array, *ErrorReply elements).
//
// # Fidelity
//
// Where a script can observe a difference, the host follows Redis 7.0. A
// differential test runs a few hundred hand-written scripts, and seeded
// random command traces over every command below and every type, on a real
// redis-server and on the host and requires identical replies; another
// checks each command's arity and key positions against COMMAND INFO. What
// they pin down:
//
//   - Reply conversion both ways; redis.call and redis.pcall argument rules
//     (numbers formatted "%.17g") and error texts, including " script:
//     <sha>, on @user_script:<line>." on script errors.
//   - redis.call raises its error as a table {err=...}, so an uncaught error
//     keeps its code ("WRONGTYPE ...") while error("x") becomes "ERR
//     user_script:1: x"; Lua's pcall turns error tables into their err
//     string, as Redis 7.0's pcall does.
//   - Globals and library tables are read only ("Attempt to modify a
//     readonly table"); reading an undefined global is an error.
//   - Numbers print as Lua 5.1 prints them ("%.14g") in tostring, "..",
//     table.concat, string.format and the string library, so a script that
//     concatenates a microsecond timestamp loses precision here exactly as
//     it does on Redis. string.format follows C's printf.
//   - math.random is Redis's lrand48-based generator, whose state starts as
//     a fresh Redis 7.0's and is carried across scripts.
//   - Keys live while now <= their expire time in milliseconds; time stands
//     still during a script; TTL rounds to the nearest second; an expire
//     time at or before now deletes the key. Sorted-set scores reply as
//     "%.17g" (Redis 7.0; 7.2 switched to the shortest form).
//   - INCRBYFLOAT and HINCRBYFLOAT add in C's long double as Redis on x86-64
//     does (the x87 format: a 64-bit significand) and store "%.17Lf" with
//     trailing zeros cut, digit for digit. Redis built where long double is
//     another format (arm64: 128-bit) stores other digits.
//   - Small hashes and sorted sets are held as Redis holds them in
//     listpacks (up to 128 entries of up to 64 bytes: one packed string per
//     key) and convert where Redis 7.0 converts, so a score of -0 reads as 0
//     in a small sorted set and as -0 once it is a skiplist.
//
// # Memory
//
// MemoryUsage counts the heap the keyspace holds. WithMaxMemory caps it as
// Redis's maxmemory does, with Redis's eviction policies (noeviction,
// allkeys-lru, volatile-lru, allkeys-random, volatile-random, volatile-ttl)
// and its OOM error for writes past the cap under noeviction; Evicted counts
// the keys freed.
//
// Commands (Commands lists them): PING ECHO TIME; DEL UNLINK RENAME RENAMENX
// EXISTS TOUCH TYPE EXPIRE PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT) TTL PTTL
// EXPIRETIME PEXPIRETIME PERSIST; GET SET (NX XX GET KEEPTTL EX PX EXAT PXAT) SETEX
// PSETEX SETNX GETSET GETDEL GETEX (EX PX EXAT PXAT PERSIST) MGET MSET MSETNX
// APPEND STRLEN INCR DECR INCRBY DECRBY INCRBYFLOAT; HGET HMGET HSET HMSET
// HSETNX HDEL HGETALL HKEYS HVALS HINCRBY HINCRBYFLOAT HLEN HSTRLEN HEXISTS;
// LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP (count) LLEN LRANGE LTRIM LINDEX LSET
// LREM LINSERT; ZADD (NX XX GT LT CH INCR) ZINCRBY ZREM ZCARD ZCOUNT ZSCORE
// ZMSCORE ZRANK ZREVRANK ZRANGE (BYSCORE REV LIMIT WITHSCORES) ZREVRANGE
// ZRANGEBYSCORE ZREVRANGEBYSCORE ZREMRANGEBYSCORE ZREMRANGEBYRANK ZPOPMIN
// ZPOPMAX. Each has Redis 7.0's arity, key positions, replies, error texts
// and WRONGTYPE checks, in Redis's order of checks.
//
// Known differences from Redis 7.0:
//
//   - Missing: the cjson, cmsgpack and struct libraries (reading them is the
//     nonexistent-global error), RESP3 (redis.setresp(3) is an error), ZRANGE
//     BYLEX, and every command not listed above. A script calling one gets
//     Redis's "ERR Unknown Redis command called from script" followed by the
//     command's name, ": 'nosuch'", or ": luahost does not implement
//     'blpop'" for a command Redis 7.0 has; Redis's message names none.
//   - Messages of Lua's own errors come from gopher-lua and are worded
//     differently ("syntax error" for "unexpected symbol", "cannot perform
//     add operation between ..." for "attempt to perform arithmetic on
//     ..."); they keep Redis's "ERR user_script:LINE:" prefix and script
//     suffix. goto and labels are rejected as Lua 5.1 rejects them, but
//     gopher-lua also refuses goto as a variable name, which Lua 5.1 allows.
//   - String patterns do not support the undocumented %f frontier; NaN made
//     by % prints as "nan" where Redis prints "-nan".
//   - The host is stricter than Redis: by default a script may only touch
//     keys passed in KEYS and keys of their cluster slots, as on a Redis
//     Cluster node (WithStrictKeys), and a script running past the
//     deadline (WithTimeout) fails instead of blocking the server; the writes
//     it made before are kept. Redis 7.0 crashes on error({}); the host
//     replies "ERR unknown error".
//   - # and ipairs see nothing in library tables (neither has an array part
//     in Redis either); pairs, next and rawget see their contents.
//   - HGETALL, HKEYS and HVALS list fields in insertion order, as Redis does
//     for hashes of up to 128 fields and values of up to 64 bytes (listpack);
//     bigger hashes keep that order where Redis lists its dict's order.
//   - Functions: FUNCTION LIST lists libraries and their functions sorted by
//     name, Redis in its hash tables' order; FUNCTION DUMP, RESTORE, STATS and
//     KILL are missing. A library that registers two function names differing
//     only in case is refused ("Function already exists in the library");
//     Redis 7.0 loads it and can crash when the library is replaced.
//   - redis.log, redis.debug and redis.set_repl do nothing; redis.breakpoint
//     returns false; redis.REDIS_VERSION is "7.0.0".
package luahost
