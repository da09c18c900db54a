// Package redisproc runs redis-server processes on loopback for the benchmark programs:
// started with exec (never daemonized), nothing on disk, killed by the kernel if the
// program dies (Linux).
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	readyTimeout = 10 * time.Second // from exec to a PONG from our process
	stopTimeout  = 5 * time.Second  // from SIGTERM to exit, then SIGKILL
)

// Server is a redis-server process on 127.0.0.1 owned by this program.
type Server struct {
	Addr string // host:port
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts redis-server on a free loopback port and returns once that process (not
// another one that took the port) answers.
func Start() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found: %w (apt-get install redis-server)", err)
	}
	dir, err := os.MkdirTemp("", "rlctl-bench-")
	if err != nil {
		return nil, err
	}
	var last error
	for range 5 {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, done: make(chan struct{})}
		s.cmd = exec.Command(bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
			"--save", "", "--appendonly", "no", "--daemonize", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := s.cmd.Start(); err != nil {
			return nil, err
		}
		go func() {
			_ = s.cmd.Wait()
			close(s.done)
		}()
		if last = s.waitReady(); last == nil {
			return s, nil
		}
		s.kill()
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server did not start: %w", last)
}

func (s *Server) waitReady() error {
	// Wait for the port first, so go-redis logs no failed dials.
	deadline := time.Now().Add(readyTimeout)
	for {
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening after %v: %w", readyTimeout, err)
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited before listening: %v", s.cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialerRetries: 1, MaxRetries: -1})
	defer c.Close()
	want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid) + "\r\n"
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil && !strings.Contains(info, want) {
			err = errors.New("another process answers on " + s.Addr)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", readyTimeout, err)
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited before answering: %v", s.cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop ends the server with SIGTERM (SIGKILL after stopTimeout) and removes its files.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		s.kill()
	}
	os.RemoveAll(s.dir)
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// FreePort returns a loopback port nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
