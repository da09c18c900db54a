package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/bench/internal/redisproc"
)

func testServer(t *testing.T) *redis.Client {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-benchmark"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("RLCTL_REQUIRE_REDIS") == "1" {
				t.Fatalf("%s not installed and RLCTL_REQUIRE_REDIS=1: apt-get install -y redis-server redis-tools, or run make test", bin)
			}
			t.Skipf("%s not installed (RLCTL_REQUIRE_REDIS=1 makes this a failure)", bin)
		}
	}
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 16})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestContenders checks every contender enforces the limit it is given (so the tables
// never compare a misconfigured peer), makes the expected round trips, and measures.
func TestContenders(t *testing.T) {
	rdb := testServer(t)
	ctx := context.Background()
	wantTrips := map[string]float64{"rlctl 3 rules, 3 calls": 3, "throttled (GCRA, CAS)": 2}
	l := load{n: 200, maxTime: 10 * time.Second, keys: 16}
	res := results{}
	var rows []string
	for _, c := range contenders() {
		t.Run(c.name, func(t *testing.T) {
			if c.ceiling != nil {
				ev, err := c.ceiling(rdb)
				if err == nil {
					cl, err := runCeiling(ctx, rdb, rdb.Options().Addr, ev, 2, l)
					if err != nil {
						t.Fatalf("ceiling: %v", err)
					}
					res.add(ceilingName(c.name), 2, cl)
					rows = append(rows, ceilingName(c.name))
				} else if err != errNoCeiling {
					t.Fatalf("ceiling: %v", err)
				}
			}
			if c.setup == nil {
				return
			}
			trips, err := sanity(ctx, rdb, c)
			if err != nil {
				t.Fatal(err)
			}
			want, ok := wantTrips[c.name]
			if !ok {
				want = 1
			}
			if trips != want {
				t.Errorf("%v round trips per decision, want %v", trips, want)
			}
			decide, err := c.setup(rdb, wide, l.keys)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := runCell(ctx, rdb, decide, 2, l, c.name)
			if err != nil {
				t.Fatal(err)
			}
			if cl.decisions != l.n || cl.allowed != l.n {
				t.Errorf("%d decisions, %d allowed; want %d of %d", cl.decisions, cl.allowed, l.n, l.n)
			}
			res.add(c.name, 2, cl)
			rows = append(rows, c.name)
		})
	}
	var b strings.Builder
	(&report{env: "test", concs: []int{2}, rounds: 1, load: l, rows: rows, res: res, trips: map[string]float64{}}).write(&b)
	for _, want := range []string{"| rlctl gcra ÷ its ceiling | ≥ 0.9 |", "| rlctl gcra ÷ redis_rate | ≥ 1.2 |", "| 3-rule stack: one call ÷ three calls | ≥ 2.5 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report has no row %q:\n%s", want, b.String())
		}
	}
}

// TestMemory checks the memory run writes and finds every key of every kind. 5,000 keys a
// contender: with 500, used_memory's own swings between two readings outweighed the keys'
// growth in a few runs of ten (a negative growth per key).
func TestMemory(t *testing.T) {
	rdb := testServer(t)
	rows, err := memoryRun(context.Background(), rdb, 5000, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 10 {
		t.Fatalf("%d rows, want 7 algorithms and 3 peers", len(rows))
	}
	for _, r := range rows {
		if r.n != 5000 || r.usage <= 0 || r.used <= 0 {
			t.Errorf("%s: %+v", r.name, r)
		}
	}
}
