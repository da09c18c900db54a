package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	createTimeout  = 30 * time.Second // redis-cli --cluster create
	clusterTimeout = 20 * time.Second // from create to every node reporting ok
	clusterSlots   = 16384
)

// Cluster is a Redis Cluster, each node a Server on 127.0.0.1 owned by the test binary:
// masters only (StartCluster), or masters with one replica each (StartReplicatedCluster).
// Its nodes run with cluster-node-timeout 2000 ms: a killed master's replica takes over
// about 2.5-4 s after the kill.
type Cluster struct {
	nodes    []*Server
	replicas int // per master
}

// StartCluster starts a Redis Cluster of n masters (n >= 3) and no replicas,
// created with redis-cli --cluster create, and returns once every node
// reports cluster_state:ok, knows all n nodes and sees all 16384 slots
// served. The cluster is stopped and its files removed at tb.Cleanup.
// Missing binaries skip or fail the test as the package comment describes;
// a failed start fails it.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return startCluster(tb, n, 0)
}

// StartReplicatedCluster starts a Redis Cluster of n masters (n >= 3), each with one
// replica: 2n nodes, created with redis-cli --cluster create --cluster-replicas 1. It
// returns once every node reports cluster_state:ok, knows all 2n nodes and sees all 16384
// slots served, and every replica's link to its master is up (so that a master killed
// at once fails over). Find a master's replica with ReplicaOf, and a node's role with
// Server.Role. Stopping and skipping are as for StartCluster.
func StartReplicatedCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return startCluster(tb, n, 1)
}

func startCluster(tb testing.TB, n, replicas int) *Cluster {
	tb.Helper()
	if n < 3 {
		tb.Fatalf("redistest: StartCluster(%d): a cluster needs at least 3 masters", n)
	}
	requireBinaries(tb)
	root := tb.TempDir()
	c := &Cluster{replicas: replicas}
	tb.Cleanup(c.stop)
	for i := range n * (1 + replicas) {
		dir := filepath.Join(root, "node"+strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		s, err := startServer(dir, true)
		if err != nil {
			tb.Fatalf("redistest: cluster node %d: %v", i, err)
		}
		c.nodes = append(c.nodes, s)
	}
	if err := c.create(); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	if err := c.waitOK(); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return c
}

// Addrs returns the addresses of the cluster's nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Node returns the cluster's i-th node, in the order of Addrs, to Pause, Kill or
// Restart it (a restarted node keeps its cluster identity and slots, not its
// data) or to send it a command with Do.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// Client returns a new go-redis cluster client seeded with every node,
// closed at tb.Cleanup. Like Server.Client, it dials once per attempt.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DialerRetries: 1})
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// create assigns the slots with redis-cli --cluster create.
func (c *Cluster) create() error {
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, binary("redis-cli"), args...)
	cmd.SysProcAttr = procAttr()
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	return nil
}

// waitOK polls CLUSTER INFO on every node until each is healthy, and INFO replication on
// every replica until its link to its master is up.
func (c *Cluster) waitOK() error {
	deadline := time.Now().Add(clusterTimeout)
	for _, s := range c.nodes {
		for {
			info, err := command(s.Addr(), "CLUSTER", "INFO")
			if err == nil {
				err = clusterHealthy(info, len(c.nodes))
			}
			if err == nil {
				err = replicaLinked(s)
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster node %s not ready after %v: %w", s.Addr(), clusterTimeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// clusterHealthy checks a CLUSTER INFO reply from a node of an n-node
// cluster.
func clusterHealthy(info string, n int) error {
	want := map[string]string{
		"cluster_state":       "ok",
		"cluster_slots_ok":    strconv.Itoa(clusterSlots),
		"cluster_known_nodes": strconv.Itoa(n),
	}
	for _, line := range strings.Split(info, "\r\n") {
		key, value, _ := strings.Cut(line, ":")
		if w, ok := want[key]; ok {
			if value != w {
				return fmt.Errorf("%s is %s, want %s", key, value, w)
			}
			delete(want, key)
		}
	}
	for key := range want {
		return fmt.Errorf("CLUSTER INFO has no %s", key)
	}
	return nil
}

// replicaLinked returns nil when s is a master or a replica whose link to its master is up.
func replicaLinked(s *Server) error {
	info, err := command(s.Addr(), "INFO", "replication")
	if err != nil {
		return err
	}
	fields := infoFields(info)
	if fields["role"] == "slave" && fields["master_link_status"] != "up" {
		return fmt.Errorf("replica %s: master_link_status is %q", s.Addr(), fields["master_link_status"])
	}
	return nil
}

// infoFields parses an INFO reply's "key:value" lines.
func infoFields(info string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if key, value, ok := strings.Cut(line, ":"); ok {
			fields[key] = value
		}
	}
	return fields
}

// Role returns the server's role from INFO replication: "master" or "slave" (a replica).
// It is safe to call at any time, on a fresh connection; a server that does not answer
// within a second is an error.
func (s *Server) Role() (string, error) {
	info, err := s.Do("INFO", "replication")
	if err != nil {
		return "", err
	}
	role := infoFields(info)["role"]
	if role == "" {
		return "", fmt.Errorf("redistest: INFO replication of %s has no role", s.Addr())
	}
	return role, nil
}

// ReplicaOf returns the node of the cluster that replicates master, as master's CLUSTER
// NODES lists it. It fails the test when master has no replica among the nodes.
func (c *Cluster) ReplicaOf(tb testing.TB, master *Server) *Server {
	tb.Helper()
	nodes, err := master.Do("CLUSTER", "NODES")
	if err != nil {
		tb.Fatalf("redistest: CLUSTER NODES on %s: %v", master.Addr(), err)
	}
	id, replicas := clusterNodes(nodes)
	for _, s := range c.nodes {
		if replicas[s.Addr()] == id && id != "" {
			return s
		}
	}
	tb.Fatalf("redistest: %s has no replica in the cluster:\n%s", master.Addr(), nodes)
	return nil
}

// clusterNodes parses a CLUSTER NODES reply: the id of the node that answered, and for
// each replica's address (host:port) the id of its master.
func clusterNodes(reply string) (self string, replicaOf map[string]string) {
	replicaOf = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(reply), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := "," + f[2] + ","
		if strings.Contains(flags, ",myself,") {
			self = f[0]
		}
		if strings.Contains(flags, ",slave,") && f[3] != "-" {
			replicaOf[addr] = f[3]
		}
	}
	return self, replicaOf
}

// stop stops every node at once.
func (c *Cluster) stop() {
	var wg sync.WaitGroup
	for _, s := range c.nodes {
		wg.Go(s.Stop)
	}
	wg.Wait()
}
