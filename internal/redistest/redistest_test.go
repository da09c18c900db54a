package redistest

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestShared(t *testing.T) {
	for _, name := range []string{"a", "b", "c"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := Shared(t)
			if again := Shared(t); again != s {
				t.Fatalf("Shared returned %p, then %p", s, again)
			}
			c := s.Client(t)
			ctx := t.Context()
			if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
				t.Fatalf("PING = %q, %v; want PONG", got, err)
			}
			key := "redistest:shared:" + name
			if err := c.Set(ctx, key, name, 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			if got, err := c.Get(ctx, key).Result(); err != nil || got != name {
				t.Fatalf("GET = %q, %v; want %q", got, err, name)
			}
		})
	}
}

func TestKillRestart(t *testing.T) {
	s := Start(t)
	addr := s.Addr()
	c := s.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	s.Kill(t)
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded")
	}
	s.Kill(t) // killing a dead server does nothing

	s.Restart(t)
	if s.Addr() != addr {
		t.Fatalf("Addr after Restart = %s, want %s", s.Addr(), addr)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET k after Restart: err = %v, want redis.Nil (nothing persists)", err)
	}

	s.Restart(t) // restarting a running server stops it first
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after second Restart: %v", err)
	}

	s.Stop()
	s.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Stop succeeded")
	}
}

func TestCluster(t *testing.T) {
	const n = 3
	cl := StartCluster(t, n)
	if got := len(cl.Addrs()); got != n {
		t.Fatalf("len(Addrs()) = %d, want %d", got, n)
	}
	c := cl.Client(t)
	ctx := t.Context()

	// Write until every master holds a key, so the client routes to each.
	masters := map[string]bool{}
	for i := 0; len(masters) < n; i++ {
		if i == 1000 {
			t.Fatalf("1000 keys reached only masters %v", masters)
		}
		key := "redistest:cluster:" + strconv.Itoa(i)
		if err := c.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		if got, err := c.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", key, got, err, i)
		}
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("MasterForKey(%s): %v", key, err)
		}
		masters[m.Options().Addr] = true
	}

	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER INFO: %v", err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("CLUSTER INFO lacks cluster_state:ok:\n%s", info)
	}
}

func TestDecideMissing(t *testing.T) {
	for _, tc := range []struct {
		require   string
		wantFatal bool
	}{
		{"", false},
		{"0", false},
		{"yes", false},
		{"1", true},
	} {
		t.Run("require="+tc.require, func(t *testing.T) {
			fatal, msg := decideMissing("redis-cli", tc.require)
			if fatal != tc.wantFatal {
				t.Errorf("fatal = %v, want %v", fatal, tc.wantFatal)
			}
			for _, want := range []string{
				"redis-cli",
				"install it (apt-get install -y redis-server) or run `make test`",
				"set RLCTL_REQUIRE_REDIS=1 to make this a failure",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
		})
	}
}

func TestClusterHealthy(t *testing.T) {
	const ok = "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_known_nodes:3\r\n"
	for _, tc := range []struct {
		name, info string
		wantErr    string
	}{
		{"ok", ok, ""},
		{"fail", strings.Replace(ok, "state:ok", "state:fail", 1), "cluster_state is fail"},
		{"slots", strings.Replace(ok, "slots_ok:16384", "slots_ok:5461", 1), "cluster_slots_ok is 5461"},
		{"nodes", strings.Replace(ok, "known_nodes:3", "known_nodes:1", 1), "cluster_known_nodes is 1"},
		{"empty", "", "CLUSTER INFO has no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := clusterHealthy(tc.info, 3)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestLaunchPortTaken(t *testing.T) {
	requireBinaries(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &Server{port: l.Addr().(*net.TCPAddr).Port, dir: t.TempDir()}
	_, err = s.launch()
	if !errors.Is(err, errPortInUse) {
		t.Fatalf("launch on a taken port: err = %v, want errPortInUse", err)
	}
	if !strings.Contains(err.Error(), "redis.log (tail)") {
		t.Errorf("error lacks the log tail: %v", err)
	}
}
