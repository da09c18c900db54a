// Package redistest starts real redis-server processes for tests.
//
// Every server listens on 127.0.0.1 on a free port chosen at start, keeps
// nothing on disk (no RDB, no AOF), writes its log to redis.log in its own
// directory, and is owned by the test binary: it is started with exec (never
// daemonized) and, on Linux, killed by the kernel if the test binary dies.
// A Redis already running on the machine (for example on 6379) is never used.
//
// A test package that calls Shared must route its tests through Main:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
//
// Shared returns one server per test binary, safe to use from parallel tests;
// tests that use it must not Kill, Restart or Stop it, and should use keys of
// their own. Start returns a private server, StartCluster a private Redis
// Cluster of masters, and StartReplicatedCluster one whose masters have a
// replica each (kill a master and its replica takes over); all are stopped at
// the test's cleanup. Tests that use
// Shared must not Pause it either.
//
// Faults for failure tests, on a private server: Kill (as a crash would) and
// Restart on the same port; Pause with SIGSTOP and Resume (a paused server is
// always resumed at the test's cleanup); Do, any command on a fresh
// connection: CONFIG SET maxmemory, CLIENT KILL, SCRIPT FLUSH, FLUSHALL,
// REPLICAOF. Cluster.Node gives one node of a cluster for the same.
//
// When redis-server or redis-cli cannot be found, Shared, Start and
// StartCluster skip the test with a message naming the missing binary, unless
// the environment sets RLCTL_REQUIRE_REDIS=1, in which case the test fails.
// A server that is found but does not start always fails the test.
package redistest
