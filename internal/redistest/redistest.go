package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// requireEnv names the environment variable that turns a missing binary
// from a skip into a failure.
const requireEnv = "RLCTL_REQUIRE_REDIS"

var (
	inMain atomic.Bool // Main is running the tests

	sharedOnce   sync.Once
	sharedServer *Server
	sharedErr    error

	liveMu sync.Mutex
	live   = map[*Server]struct{}{} // servers started and not yet stopped
)

// Main runs the package's tests and then stops every server this package
// started, removing the shared server's directory. Use it in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
func Main(m *testing.M) int {
	inMain.Store(true)
	code := m.Run()
	liveMu.Lock()
	servers := make([]*Server, 0, len(live))
	for s := range live {
		servers = append(servers, s)
	}
	liveMu.Unlock()
	for _, s := range servers {
		s.Stop()
	}
	if sharedServer != nil {
		os.RemoveAll(sharedServer.dir)
	}
	return code
}

// Available reports whether redis-server and redis-cli can be found, on PATH
// or in /usr/bin, /usr/sbin or /usr/local/bin.
func Available() bool {
	return missingBinary() == ""
}

// Shared returns the test binary's shared redis-server, starting it on first
// use. It fails the test unless TestMain calls Main, which stops the server.
// Missing binaries skip or fail the test as the package comment describes;
// a failed start fails it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	requireBinaries(tb)
	if !inMain.Load() {
		tb.Fatal("redistest: Shared needs TestMain to call redistest.Main, which stops the shared server")
	}
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rlctl-redistest-*")
		if err != nil {
			sharedErr = err
			return
		}
		sharedServer, sharedErr = startServer(dir, false)
		if sharedErr != nil {
			os.RemoveAll(dir)
		}
	})
	if sharedErr != nil {
		tb.Fatalf("redistest: shared server: %v", sharedErr)
	}
	return sharedServer
}

// Start starts a redis-server private to the test, stopped at tb.Cleanup.
// Missing binaries skip or fail the test as the package comment describes;
// a failed start fails it.
func Start(tb testing.TB) *Server {
	tb.Helper()
	requireBinaries(tb)
	s, err := startServer(tb.TempDir(), false)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// StartSentinel starts a Redis Sentinel private to the test that monitors
// primary under the name master (a quorum of 1), stopped at tb.Cleanup. It
// returns once the Sentinel answers, and it knows the primary from its start.
func StartSentinel(tb testing.TB, master string, primary *Server) *Server {
	tb.Helper()
	requireBinaries(tb)
	s, err := startAs(tb.TempDir(), false, master+" 127.0.0.1 "+strconv.Itoa(primary.port))
	if err != nil {
		tb.Fatalf("redistest: sentinel: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// requireBinaries returns when both binaries are found, and otherwise skips
// or fails tb as decideMissing says.
func requireBinaries(tb testing.TB) {
	tb.Helper()
	missing := missingBinary()
	if missing == "" {
		return
	}
	fatal, msg := decideMissing(missing, os.Getenv(requireEnv))
	if fatal {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// decideMissing says what to do when binary cannot be found: fail when the
// require variable is "1", skip otherwise, and always say how to fix it.
func decideMissing(binary, require string) (fatal bool, msg string) {
	msg = fmt.Sprintf("redistest: %s not found on PATH or in %v: install it (apt-get install -y redis-server) "+
		"or run `make test`; set %s=1 to make this a failure", binary, fallbackDirs, requireEnv)
	return require == "1", msg
}

// fallbackDirs are searched, in order, after PATH.
var fallbackDirs = []string{"/usr/bin", "/usr/sbin", "/usr/local/bin"}

var binaries = sync.OnceValues(func() (map[string]string, string) {
	found := map[string]string{}
	for _, name := range []string{"redis-server", "redis-cli"} {
		path, err := lookBinary(name)
		if err != nil {
			return nil, name
		}
		found[name] = path
	}
	return found, ""
})

// missingBinary returns the name of the first binary that cannot be found,
// or "" when both are.
func missingBinary() string {
	_, missing := binaries()
	return missing
}

// binary returns the path of a binary that missingBinary found.
func binary(name string) string {
	found, _ := binaries()
	return found[name]
}

func lookBinary(name string) (string, error) {
	if path, err := exec.LookPath(name); err == nil {
		return path, nil
	}
	for _, dir := range fallbackDirs {
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", errors.New(name + " not found")
}
