package engine

import (
	"context"
	"fmt"
	"testing"

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

// BenchmarkAllow measures whole decisions on a real redis-server: a one-rule policy, a
// three-rule stack in one call, and the same three rules as three one-rule calls.
func BenchmarkAllow(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	reqs := make([]Attrs, 1024)
	for i := range reqs {
		reqs[i] = Attrs{"ip": fmt.Sprint("10.0.", i%4, ".", i), "user": fmt.Sprint("u", i), "tenant": fmt.Sprint("t", i%8)}
	}
	run := func(b *testing.B, engines ...*Engine) {
		ctx := context.Background()
		b.ReportAllocs()
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
	b.Run("1-rule", func(b *testing.B) { run(b, New(NewRedis(rdb), compile(b, oneRule))) })
	b.Run("3-rule-stack", func(b *testing.B) { run(b, New(NewRedis(rdb), compile(b, threeRules))) })
	b.Run("3-separate-calls", func(b *testing.B) {
		var es []*Engine
		for _, name := range []string{"per_ip", "per_user", "per_tenant"} {
			cfg := compile(b, threeRules)
			p := *cfg
			pol := *p.policies[0]
			for _, r := range pol.Rules {
				if r.Name == name {
					pol.Rules = []*dsl.Rule{r}
				}
			}
			p.policies = []*dsl.Policy{&pol}
			es = append(es, New(NewRedis(rdb), &p))
		}
		run(b, es...)
	})
}
