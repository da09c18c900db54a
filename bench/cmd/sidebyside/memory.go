package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/bench/internal/redisproc"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

// memLimit is the limit keys are written with in the memory run: long enough that no key
// expires while n keys are written and measured.
var memLimit = limit{count: 1000, period: 7 * 24 * time.Hour}

// memRow is the memory one kind of key takes, after one request of cost 1 on each of n keys.
type memRow struct {
	name     string
	n        int64 // keys alive after writing (DBSIZE)
	usage    float64
	used     float64 // used_memory delta / n
	encoding string
	key      string // a sample key
}

const memSamples = 1000

// memoryRun writes n keys per built-in algorithm through the engine script (pipelined
// EVALSHA, the call the engine makes) and n keys through each peer (its own API, 32
// callers), and measures each kind of key on an otherwise empty server.
func memoryRun(ctx context.Context, rdb *redis.Client, n int, progress func(string)) ([]memRow, error) {
	var rows []memRow
	script := algorithms.Default()
	if err := rdb.ScriptLoad(ctx, script.Source).Err(); err != nil {
		return nil, err
	}
	for _, alg := range algorithms.Builtin() {
		progress("memory: rlctl " + alg.Name)
		wire, err := memWire(alg)
		if err != nil {
			return nil, err
		}
		write := func(ctx context.Context) error {
			const batch = 1000
			for lo := 0; lo < n; lo += batch {
				pipe := rdb.Pipeline()
				for i := lo; i < min(lo+batch, n); i++ {
					call := algorithms.Call{Op: algorithms.OpCheck, Now: algorithms.ServerTime, Rules: []algorithms.Rule{{
						Key: memKey(i), Algorithm: alg, Cost: 1, Params: wire, Lease: fmt.Sprintf("lease-%08d", i),
					}}}
					argv, err := call.Argv()
					if err != nil {
						return err
					}
					args := make([]any, len(argv))
					for j := range argv {
						args[j] = argv[j]
					}
					pipe.EvalSha(ctx, script.SHA1, call.Keys(), args...)
				}
				cmds, err := pipe.Exec(ctx)
				if err != nil {
					return err
				}
				for _, c := range cmds {
					rep, err := algorithms.DecodeReply(c.(*redis.Cmd).Val(), 1)
					if err != nil {
						return err
					}
					if !rep.Allowed {
						return fmt.Errorf("%s denied a first request", alg.Name)
					}
				}
			}
			return nil
		}
		row, err := measureKeys(ctx, rdb, "rlctl "+alg.Name, n, write)
		if err != nil {
			return nil, fmt.Errorf("memory, %s: %w", alg.Name, err)
		}
		rows = append(rows, row)
	}
	for _, p := range peers {
		progress("memory: " + p.name)
		decide, err := p.setup(rdb, memLimit, n)
		if err != nil {
			return nil, err
		}
		write := func(ctx context.Context) error {
			allowed, err := drive(ctx, decide, n, 32, time.Hour, nil)
			if err == nil && allowed != n {
				err = fmt.Errorf("allowed %d of %d first requests", allowed, n)
			}
			return err
		}
		row, err := measureKeys(ctx, rdb, p.name, n, write)
		if err != nil {
			return nil, fmt.Errorf("memory, %s: %w", p.name, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// memKey is the key of request i in the memory run: like every peer's key, a 5-byte prefix
// and u<i>, so key names weigh the same for all.
func memKey(i int) string { return fmt.Sprintf("rl:k:u%d", i) }

// memWire returns alg's wire parameters for memLimit, through the policy language.
func memWire(alg *algorithms.Algorithm) ([]int64, error) {
	params := map[string]string{
		"fixed_window":   fmt.Sprintf("limit = %d\n window = %q", memLimit.count, span(memLimit.period)),
		"sliding_log":    fmt.Sprintf("limit = %d\n window = %q", memLimit.count, span(memLimit.period)),
		"sliding_window": fmt.Sprintf("limit = %d\n window = %q", memLimit.count, span(memLimit.period)),
		"token_bucket":   fmt.Sprintf("capacity = %d\n rate = \"%d/%s\"", memLimit.count, memLimit.count, span(memLimit.period)),
		"leaky_bucket":   fmt.Sprintf("capacity = %d\n rate = \"%d/%s\"", memLimit.count, memLimit.count, span(memLimit.period)),
		"gcra":           fmt.Sprintf("burst = %d\n rate = \"%d/%s\"", memLimit.count, memLimit.count, span(memLimit.period)),
		"concurrency":    fmt.Sprintf("max = %d\n ttl = %q", memLimit.count, span(memLimit.period)),
	}[alg.Name]
	if params == "" {
		return nil, fmt.Errorf("no memory-run parameters for %s", alg.Name)
	}
	src := fmt.Sprintf("policy \"mem\" {\n rule \"k\" {\n algorithm = %q\n key = request.user\n %s\n }\n}\n", alg.Name, params)
	cfg, diags := dsl.Parse(map[string][]byte{"mem.hcl": []byte(src)})
	if diags.HasErrors() {
		return nil, diags
	}
	return cfg.Policies[0].Rules[0].Wire(engine.Attrs{})
}

// measureKeys empties the server, runs write, and measures the keys it left: MEMORY USAGE
// of memSamples keys spread over the keyspace, and used_memory's growth per key.
func measureKeys(ctx context.Context, rdb *redis.Client, name string, n int, write func(context.Context) error) (memRow, error) {
	row := memRow{name: name}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return row, err
	}
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return row, err
	}
	if err := write(ctx); err != nil {
		return row, err
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return row, err
	}
	if row.n, err = rdb.DBSize(ctx).Result(); err != nil {
		return row, err
	}
	if row.n != int64(n) {
		return row, fmt.Errorf("%d keys alive after writing %d", row.n, n)
	}
	row.used = float64(after-before) / float64(n)
	var total int64
	for s := range memSamples {
		key, err := rdb.RandomKey(ctx).Result()
		if err != nil {
			return row, err
		}
		u, err := rdb.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			return row, err
		}
		total += u
		if s == 0 {
			typ, err1 := rdb.Type(ctx, key).Result()
			enc, err2 := rdb.ObjectEncoding(ctx, key).Result()
			if err1 != nil || err2 != nil {
				return row, fmt.Errorf("TYPE/OBJECT ENCODING %s: %v %v", key, err1, err2)
			}
			row.encoding, row.key = typ+" ("+enc+")", key
		}
	}
	row.usage = float64(total) / memSamples
	return row, nil
}

// usedMemory is the server's used_memory less its clients' buffers (mem_clients_normal):
// a pipeline's query and reply buffers grow and shrink between two readings, and in a
// small run that swing exceeds the keys' own growth (one CI run read -55 bytes a key).
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	used, err := redisproc.InfoField(info, "used_memory")
	if err != nil {
		return 0, err
	}
	clients, err := redisproc.InfoField(info, "mem_clients_normal")
	return int64(used - clients), err
}
