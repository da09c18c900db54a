package engine

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/redistest"
)

const oneRule = `
policy "b1" {
  rule "per_user" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1000000/s"
    burst     = 1000000
  }
}`

const threeRules = `
policy "b3" {
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "1000000/s"
    burst     = 1000000
  }
  rule "per_user" {
    algorithm = "token_bucket"
    key       = request.user
    capacity  = 1000000
    rate      = "1000000/s"
  }
  rule "per_tenant" {
    algorithm = "sliding_window"
    key       = request.tenant
    limit     = 1000000
    window    = "1s"
  }
}`

// benchClients is the number of concurrent clients on both sides of every comparison.
const benchClients = 8

// BenchmarkAllow measures whole decisions on a real redis-server with 8 concurrent
// callers: a one-rule policy, a three-rule stack in one call, the same three rules as
// three one-rule calls, and — as the ceiling — redis-benchmark sending FCALL of the same
// script with the same arguments from 8 clients to the same server. The ratio
// engine/ceiling is the share of the server's script throughput the engine reaches.
func BenchmarkAllow(b *testing.B) {
	srv := redistest.Shared(b)
	rdb := srv.Client(b)
	// The settings the engine asks for (see Redis): without ContextTimeoutEnabled every
	// call runs on a goroutine of its own so that the deadline holds.
	o := rdb.Options()
	o.PoolSize, o.ContextTimeoutEnabled, o.MaxRetries = 2*benchClients, true, -1
	reqs := make([]Attrs, 1024)
	for i := range reqs {
		reqs[i] = Attrs{"ip": fmt.Sprint("10.0.", i%4, ".", i), "user": fmt.Sprint("u", i), "tenant": fmt.Sprint("t", i%8)}
	}
	run := func(b *testing.B, engines ...*Engine) {
		ctx := context.Background()
		b.ReportAllocs()
		b.SetParallelism(max(1, benchClients/gomaxprocs()))
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				for _, e := range engines {
					if _, err := e.Allow(ctx, reqs[i%len(reqs)]); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	}
	b.Run("engine/1-rule", func(b *testing.B) { run(b, New(NewRedis(rdb), compile(b, oneRule))) })
	b.Run("ceiling/1-rule", func(b *testing.B) {
		ceiling(b, rdb, srv.Addr(), compile(b, oneRule), Attrs{"user": "u__rand_int__"})
	})
	b.Run("engine/3-rule-stack", func(b *testing.B) { run(b, New(NewRedis(rdb), compile(b, threeRules))) })
	b.Run("ceiling/3-rule-stack", func(b *testing.B) {
		ceiling(b, rdb, srv.Addr(), compile(b, threeRules), Attrs{"ip": "10.0.0.__rand_int__", "user": "u__rand_int__", "tenant": "t__rand_int__"})
	})
	b.Run("engine/3-separate-calls", func(b *testing.B) {
		var es []*Engine
		for i := range 3 {
			p := *compile(b, threeRules)
			pol := *p.policies[0]
			pol.Rules = []*dsl.Rule{pol.Rules[i]}
			p.policies = []*dsl.Policy{&pol}
			es = append(es, New(NewRedis(rdb), &p))
		}
		run(b, es...)
	})
}

func gomaxprocs() int {
	return max(1, runtime.GOMAXPROCS(0))
}

var rpsLine = regexp.MustCompile(`([0-9.]+) requests per second`)

// ceiling runs redis-benchmark: b.N FCALLs of plan's library, as the engine sends them on
// Redis 7, with the ARGV the engine would send for req (redis-benchmark replaces __rand_int__ with 0..1023 per call).
func ceiling(b *testing.B, rdb *redis.Client, addr string, plan *Plan, req Attrs) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark not found")
	}
	e := New(NewRedis(rdb), plan)
	rules, _, _, err := e.collect(req, 1, 0, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	call := algorithms.Call{Op: algorithms.OpCheck, Now: algorithms.ServerTime}
	for _, r := range rules {
		call.Rules = append(call.Rules, r.call)
	}
	argv, err := call.Argv()
	if err != nil {
		b.Fatal(err)
	}
	if err := rdb.FunctionLoadReplace(context.Background(), plan.script.Library).Err(); err != nil {
		b.Fatal(err)
	}
	host, port, _ := strings.Cut(addr, ":")
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(benchClients), "-n", strconv.Itoa(max(b.N, 1000)),
		"-r", "1024", "-q", "FCALL", plan.script.Function, strconv.Itoa(len(call.Rules))}
	for _, k := range call.Keys() {
		args = append(args, k)
	}
	args = append(args, argv...)
	b.ResetTimer()
	out, err := exec.Command(bin, args...).CombinedOutput()
	b.StopTimer()
	if err != nil {
		b.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	m := rpsLine.FindAllSubmatch(out, -1)
	if m == nil {
		b.Fatalf("redis-benchmark printed no rate:\n%s", out)
	}
	rps, _ := strconv.ParseFloat(string(m[len(m)-1][1]), 64)
	b.ReportMetric(rps, "decisions/s")
}
