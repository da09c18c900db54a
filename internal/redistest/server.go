package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	readyTimeout = 10 * time.Second // from exec to a PONG from our process
	stopTimeout  = 5 * time.Second  // from SIGTERM (or SIGKILL) to exit
	bindAttempts = 5                // launches tried when the port is taken under us
	maxPort      = 55000            // cluster ports stay below it so that port+10000 is valid
	busOffset    = 10000            // Redis Cluster bus port = port + busOffset
)

// errPortInUse reports that redis-server could not bind its port, which
// another process took between freePort and the bind.
var errPortInUse = errors.New("port already in use")

// Server is a redis-server process on 127.0.0.1 owned by the test binary.
// Its address stays the same across Kill and Restart.
type Server struct {
	port    int
	dir     string
	cluster bool
	// monitor, for a Sentinel, is the primary it watches: "NAME HOST PORT".
	monitor string
	// extra are further redis-server arguments (StartTLS).
	extra []string

	mu     sync.Mutex
	proc   *process // nil when not running
	paused bool     // proc is stopped by SIGSTOP
}

// process is one run of redis-server; done closes once Wait has returned.
type process struct {
	cmd    *exec.Cmd
	output bytes.Buffer // stdout and stderr, readable once done is closed
	done   chan struct{}
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Client returns a new go-redis client to the server, closed at tb.Cleanup.
// It has go-redis's default options except that it dials once per attempt
// (DialerRetries 1), so a command to a killed server fails in milliseconds
// rather than seconds.
func (s *Server) Client(tb testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialerRetries: 1})
	tb.Cleanup(func() { c.Close() })
	return c
}

// Kill sends SIGKILL to the server, as a crash would, and waits for it to
// exit. It does nothing when the server is not running.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	err := s.proc.kill()
	s.proc, s.paused = nil, false
	forget(s)
	if err != nil {
		tb.Fatalf("redistest: kill %s: %v", s.Addr(), err)
	}
}

// Pause stops the server with SIGSTOP, as a stalled host or a long fork would: it keeps
// its port and its connections, the kernel still accepts new ones and buffers what clients
// send, and nothing is answered until Resume. Resume is registered at tb.Cleanup, so a
// test that fails while the server is paused leaves no stopped process behind. Pausing a
// paused or stopped server does nothing. It returns once the server has stopped (on Linux).
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.paused {
		return
	}
	if err := s.proc.signal(sigStop); err != nil {
		tb.Fatalf("redistest: pause %s: %v", s.Addr(), err)
	}
	waitStopped(s.proc.cmd.Process.Pid)
	s.paused = true
	tb.Cleanup(s.Resume)
}

// Resume continues a paused server with SIGCONT; it then executes, in order, what its
// clients sent meanwhile. Resuming a server that is not paused does nothing.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || !s.paused {
		return
	}
	s.proc.signal(sigCont)
	s.paused = false
}

// Do sends one command to the server on a new connection, as redis-cli would, and
// returns its reply: a simple string, a bulk string, or an integer in decimal; an error
// reply is returned as an error whose text is the reply's (for example "OOM command not
// allowed ..."). A server that does not answer within a second is an error. It is safe
// for concurrent use, from any goroutine, including while clients of the server are
// blocked.
func (s *Server) Do(args ...string) (string, error) {
	return command(s.Addr(), args...)
}

// Restart starts the server again on the same address, stopping it first
// if it is running, and returns once it answers PING. The data is gone: the
// server keeps nothing on disk.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.stop()
		s.proc, s.paused = nil, false
		forget(s)
	}
	var err error
	for range bindAttempts {
		var p *process
		if p, err = s.launch(); err == nil {
			s.proc = p
			remember(s)
			return
		}
		if !errors.Is(err, errPortInUse) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("redistest: restart: %v", err)
}

// Stop stops the server gracefully, with SIGTERM and then SIGKILL if it has
// not exited within a few seconds. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.stop()
	s.proc, s.paused = nil, false
	forget(s)
}

// startServer starts a redis-server keeping its files in dir, on a new free
// port for each launch that loses its port to another process.
func startServer(dir string, cluster bool) (*Server, error) {
	return startAs(dir, cluster, "")
}

// startAs starts a server keeping its files in dir, a cluster node when cluster, a
// Sentinel monitoring monitor ("NAME HOST PORT") when that is set, on a new free port for
// each launch that loses its port to another process.
func startAs(dir string, cluster bool, monitor string) (*Server, error) {
	var err error
	for range bindAttempts {
		var port int
		if port, err = freePort(cluster); err != nil {
			return nil, err
		}
		s := &Server{port: port, dir: dir, cluster: cluster, monitor: monitor}
		var p *process
		if p, err = s.launch(); err == nil {
			s.proc = p
			remember(s)
			return s, nil
		}
		if !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
	return nil, err
}

// launch runs redis-server on s.port and waits until it answers.
func (s *Server) launch() (*process, error) {
	logfile := filepath.Join(s.dir, "redis.log")
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--protected-mode", "no",
		"--daemonize", "no",
		"--logfile", logfile,
	}
	if s.monitor == "" {
		args = append(args, "--save", "", "--appendonly", "no")
	} else {
		// A Sentinel keeps no data; it runs from a file it may rewrite, which names the
		// primary it monitors.
		conf := filepath.Join(s.dir, "sentinel.conf")
		if err := os.WriteFile(conf, []byte("sentinel monitor "+s.monitor+" 1\n"), 0o644); err != nil {
			return nil, err
		}
		args = append([]string{conf, "--sentinel"}, args...)
	}
	if s.cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000",
		)
	}
	args = append(args, s.extra...)
	p := &process{cmd: exec.Command(binary("redis-server"), args...), done: make(chan struct{})}
	p.cmd.Stdout = &p.output
	p.cmd.Stderr = &p.output
	p.cmd.SysProcAttr = procAttr()
	if err := startProcess(p.cmd); err != nil {
		return nil, fmt.Errorf("redis-server on %s: %w", s.Addr(), err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()

	err := waitReady(s.Addr(), p)
	if err == nil {
		return p, nil
	}
	exited := p.exited()
	var output string
	if p.kill() == nil {
		output = p.output.String()
	}
	tail := logTail(logfile, 20)
	if exited && strings.Contains(tail, "Address already in use") {
		err = errPortInUse
	}
	return nil, fmt.Errorf("redis-server on %s: %w\n--- %s (tail) ---\n%s%s", s.Addr(), err, logfile, tail, output)
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to exit.
func (p *process) kill() error {
	p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("pid %d still running %v after SIGKILL", p.cmd.Process.Pid, stopTimeout)
	}
}

// signal sends sig to the process unless it has exited.
func (p *process) signal(sig os.Signal) error {
	if p.exited() {
		return fmt.Errorf("pid %d has exited: %v", p.cmd.Process.Pid, p.cmd.ProcessState)
	}
	return p.cmd.Process.Signal(sig)
}

// stop sends SIGTERM and waits for the process to exit, then kills it. SIGCONT follows
// SIGTERM so that a paused process handles it.
func (p *process) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.signal(sigCont)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.kill()
	}
}

// waitReady polls addr until it answers PING and INFO shows it is p's
// process rather than one that took the port, until p exits, or until
// readyTimeout.
func waitReady(addr string, p *process) error {
	deadline := time.Now().Add(readyTimeout)
	want := "process_id:" + strconv.Itoa(p.cmd.Process.Pid) + "\r\n"
	for {
		err := func() error {
			if _, err := command(addr, "PING"); err != nil {
				return err
			}
			info, err := command(addr, "INFO", "server")
			if err == nil && !strings.Contains(info, want) {
				err = errors.New("another process answers on " + addr)
			}
			return err
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", readyTimeout, err)
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before answering PING: %v", p.cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// command sends one command to addr on a new connection and returns its
// simple string, bulk string or integer reply; an error reply is returned as
// an error.
func command(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))

	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(req.String())); err != nil {
		return "", err
	}

	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, ":"):
		return line[1:], nil
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply header %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// freePort returns a loopback port nothing listens on; for a cluster node,
// one below maxPort whose bus port is free as well.
func freePort(cluster bool) (int, error) {
	for i := range 100 {
		port := 0
		if i >= 50 { // the kernel keeps offering ports >= maxPort
			port = 20000 + rand.IntN(maxPort-20000)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		if !cluster {
			l.Close()
			return port, nil
		}
		if port >= maxPort {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+busOffset)))
		l.Close()
		if err != nil {
			continue
		}
		bus.Close()
		return port, nil
	}
	return 0, errors.New("no free loopback port found")
}

// logTail returns the last n lines of the file at path, or why it cannot.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// remember and forget track the running servers that Main stops.
func remember(s *Server) {
	liveMu.Lock()
	live[s] = struct{}{}
	liveMu.Unlock()
}

func forget(s *Server) {
	liveMu.Lock()
	delete(live, s)
	liveMu.Unlock()
}

// startProcess starts cmd from one OS thread that lives as long as the test binary. The
// kernel sends Pdeathsig when the thread that forked the child exits, not the process, and
// the Go runtime may retire a thread; starting every server from a locked thread that never
// exits means a server dies only with the test binary.
func startProcess(cmd *exec.Cmd) error {
	launcherOnce.Do(func() {
		launches = make(chan launch)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives until exit
			for l := range launches {
				l.done <- l.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	launches <- launch{cmd: cmd, done: done}
	return <-done
}

type launch struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	launcherOnce sync.Once
	launches     chan launch
)
