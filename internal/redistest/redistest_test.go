package redistest

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

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

// quick returns a client that gives up on a command after 100ms, to see a paused
// server without waiting for go-redis's default timeouts.
func quick(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1,
		DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPauseResume(t *testing.T) {
	s := Start(t)
	ctx := t.Context()
	c := quick(t, s.Addr())
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}

	s.Pause(t)
	s.Pause(t) // pausing a paused server does nothing
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING to a paused server succeeded")
	}
	// What clients send meanwhile waits in the socket and runs on Resume.
	blocked := s.Client(t)
	done := make(chan error, 1)
	go func() { done <- blocked.Set(ctx, "queued", "v", 0).Err() }()
	select {
	case err := <-done:
		t.Fatalf("SET to a paused server returned: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.Resume()
	s.Resume() // resuming a running server does nothing
	if err := <-done; err != nil {
		t.Fatalf("SET sent while paused: %v", err)
	}
	if got, err := c.Get(ctx, "queued").Result(); err != nil || got != "v" {
		t.Fatalf("GET queued = %q, %v; want v", got, err)
	}

	// A test that ends while the server is paused leaves it running.
	t.Run("cleanup", func(t *testing.T) { s.Pause(t) })
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after a subtest ended with the server paused: %v", err)
	}

	// Kill and Stop work on a paused server, and promptly.
	s.Pause(t)
	s.Kill(t)
	s.Restart(t)
	s.Pause(t)
	start := time.Now()
	s.Stop()
	if d := time.Since(start); d > stopTimeout/2 {
		t.Fatalf("Stop of a paused server took %v", d)
	}
	s.Resume() // a stopped server: nothing to do
}

func TestDo(t *testing.T) {
	s := Start(t)
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{[]string{"SET", "k", "v"}, "OK", ""},
		{[]string{"GET", "k"}, "v", ""},
		{[]string{"INCR", "n"}, "1", ""},
		{[]string{"SCRIPT", "FLUSH"}, "OK", ""},
		{[]string{"NOSUCH"}, "", "ERR unknown command"},
		// A full memory refuses writes with OOM, and gives them back when restored.
		{[]string{"SET", "filler", strings.Repeat("x", 2<<20)}, "OK", ""},
		{[]string{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, "OK", ""},
		{[]string{"CONFIG", "SET", "maxmemory", "1mb"}, "OK", ""},
		{[]string{"SET", "k", "w"}, "", "OOM command not allowed"},
		{[]string{"CONFIG", "SET", "maxmemory", "0"}, "OK", ""},
		{[]string{"SET", "k", "w"}, "OK", ""},
		{[]string{"FLUSHALL"}, "OK", ""},
		{[]string{"EXISTS", "k", "n", "filler"}, "0", ""},
	} {
		got, err := s.Do(tc.args...)
		if tc.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("%q: err = %v, want one starting with %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Fatalf("%q = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}

	// CLIENT KILL answers how many connections it closed (never its own).
	c := s.Client(t)
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Do("CLIENT", "KILL", "TYPE", "normal")
	if n, aerr := strconv.Atoi(got); err != nil || aerr != nil || n < 1 {
		t.Fatalf("CLIENT KILL TYPE normal with a client connected = %q, %v; want a count >= 1", got, err)
	}
}

// TestReplicaOf turns a primary into a read-only replica of another server and back.
func TestReplicaOf(t *testing.T) {
	s, other := Start(t), Start(t)
	host, port, _ := net.SplitHostPort(other.Addr())
	if _, err := s.Do("REPLICAOF", host, port); err != nil {
		t.Fatalf("REPLICAOF: %v", err)
	}
	if _, err := s.Do("SET", "k", "v"); err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
		t.Fatalf("SET on a replica: err = %v, want READONLY", err)
	}
	if _, err := s.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatalf("REPLICAOF NO ONE: %v", err)
	}
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatalf("SET after REPLICAOF NO ONE: %v", err)
	}
}

func TestDoUnanswered(t *testing.T) {
	s := Start(t)
	s.Pause(t)
	start := time.Now()
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING to a paused server succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Do on a paused server took %v", d)
	}
	s.Kill(t)
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING to a killed server succeeded")
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

	// One paused node stops answering; the others do not.
	for i, addr := range cl.Addrs() {
		if got := cl.Node(i).Addr(); got != addr {
			t.Fatalf("Node(%d).Addr() = %s, want %s", i, got, addr)
		}
	}
	cl.Node(0).Pause(t)
	if err := quick(t, cl.Addrs()[0]).Ping(ctx).Err(); err == nil {
		t.Fatal("PING to a paused node succeeded")
	}
	if got, err := cl.Node(1).Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING to node 1 while node 0 is paused = %q, %v", got, err)
	}
	cl.Node(0).Resume()
	if got, err := cl.Node(0).Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING to node 0 after Resume = %q, %v", got, err)
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

// TestSentinel: a Sentinel started by the harness answers at once with the primary it
// monitors.
func TestSentinel(t *testing.T) {
	primary := Start(t)
	s := StartSentinel(t, "mymaster", primary)
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	addr, err := c.GetMasterAddrByName(context.Background(), "mymaster").Result()
	if err != nil || len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != primary.Addr() {
		t.Fatalf("the sentinel names %v (%v) as mymaster, want %s", addr, err, primary.Addr())
	}
}

// TestReplicatedCluster: a cluster of 3 masters with a replica each has 6 nodes; each
// master's replica is a node that reports itself a replica and replicates it.
func TestReplicatedCluster(t *testing.T) {
	cl := StartReplicatedCluster(t, 3)
	if got := len(cl.Addrs()); got != 6 {
		t.Fatalf("len(Addrs()) = %d, want 6", got)
	}
	var masters, replicas int
	for i := range cl.Addrs() {
		s := cl.Node(i)
		role, err := s.Role()
		if err != nil {
			t.Fatal(err)
		}
		switch role {
		case "master":
			masters++
			r := cl.ReplicaOf(t, s)
			if role, err := r.Role(); err != nil || role != "slave" {
				t.Fatalf("ReplicaOf(%s) = %s, role %q %v", s.Addr(), r.Addr(), role, err)
			}
			info, err := r.Do("INFO", "replication")
			if err != nil || !strings.Contains(info, "master_port:"+strconv.Itoa(s.port)+"\r\n") {
				t.Fatalf("%s does not replicate %s:\n%s %v", r.Addr(), s.Addr(), info, err)
			}
		case "slave":
			replicas++
		}
	}
	if masters != 3 || replicas != 3 {
		t.Fatalf("%d masters and %d replicas, want 3 and 3", masters, replicas)
	}
}

func TestClusterNodes(t *testing.T) {
	const reply = "07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected\n" +
		"67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922\n" +
		"e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460\n" +
		"6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 slave,fail 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 1426238316232 5 connected\n"
	self, replicaOf := clusterNodes(reply)
	if self != "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca" {
		t.Errorf("self = %q", self)
	}
	want := map[string]string{
		"127.0.0.1:30004": "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca",
		"127.0.0.1:30005": "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1",
	}
	if len(replicaOf) != len(want) {
		t.Fatalf("replicaOf = %v, want %v", replicaOf, want)
	}
	for addr, id := range want {
		if replicaOf[addr] != id {
			t.Errorf("replicaOf[%s] = %q, want %q", addr, replicaOf[addr], id)
		}
	}
}

// TestCommandCalls reads INFO commandstats as a real server writes it, and refuses a
// cmdstat line without a count.
func TestCommandCalls(t *testing.T) {
	s := Start(t)
	for _, cmd := range [][]string{{"SET", "k", "v"}, {"GET", "k"}, {"GET", "k"}} {
		if _, err := s.Do(cmd...); err != nil {
			t.Fatal(err)
		}
	}
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	calls, err := CommandCalls(info)
	if err != nil || calls["get"] != 2 || calls["set"] != 1 || calls["hget"] != 0 {
		t.Fatalf("CommandCalls = %v, %v; want get 2, set 1, no hget", calls, err)
	}
	if _, err := CommandCalls("# Commandstats\r\ncmdstat_get:usec=3\r\n"); err == nil {
		t.Error("a line without calls was read")
	}
}
