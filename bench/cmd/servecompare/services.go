package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rlctl/rlctl/bench/internal/redisproc"
)

const (
	readyTimeout = 30 * time.Second // from exec to a decision with the configured limit
	stopTimeout  = 5 * time.Second  // from SIGTERM to exit, then SIGKILL
)

// bins are the two services' binaries, built into the run's directory, and the version
// of envoyproxy/ratelimit that go.mod names.
type bins struct{ rlctl, ratelimit, ratelimitVersion string }

// build builds rlctl from the main module and envoyproxy/ratelimit's service from this
// module's tool dependency (so the versions are go.mod's).
func build(ctx context.Context, mainDir, dir string) (bins, error) {
	b := bins{rlctl: filepath.Join(dir, "rlctl"), ratelimit: filepath.Join(dir, "ratelimit")}
	rlctl := exec.CommandContext(ctx, "go", "build", "-o", b.rlctl, "./cmd/rlctl")
	rlctl.Dir = mainDir
	ratelimit := exec.CommandContext(ctx, "go", "build", "-o", b.ratelimit, "github.com/envoyproxy/ratelimit/src/service_cmd")
	for _, c := range []*exec.Cmd{rlctl, ratelimit} {
		c.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
		if out, err := c.CombinedOutput(); err != nil {
			return b, fmt.Errorf("%v: %w\n%s", c.Args, err, out)
		}
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", "github.com/envoyproxy/ratelimit").Output()
	if err != nil {
		return b, fmt.Errorf("go list -m github.com/envoyproxy/ratelimit: %w", err)
	}
	b.ratelimitVersion = strings.TrimSpace(string(out))
	return b, nil
}

// setup is what starting a service needs.
type setup struct {
	bins      bins
	dir       string // the run's directory: configs, logs
	testdata  string // serve/testdata/envoy: edge.hcl and ratelimit.yaml
	redisAddr string
	limit     int
}

// service is one rate limit service process on loopback, and a client of it.
type service struct {
	name     string
	grpcAddr string
	cmd      *exec.Cmd
	done     chan struct{}
	logPath  string
	conn     *grpc.ClientConn
	rls      rlsv3.RateLimitServiceClient
}

// startRlctl starts rlctl serve on edge.hcl with its limits raised.
func startRlctl(ctx context.Context, su setup) (*service, error) {
	policy := filepath.Join(su.dir, "policy")
	if err := raise(filepath.Join(su.testdata, "edge.hcl"), filepath.Join(policy, "edge.hcl"), `(?m)^(\s*limit\s*=\s*)\d+$`, su.limit); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	s := &service{name: "rlctl serve", grpcAddr: loopback(ports[0])}
	s.cmd = exec.CommandContext(ctx, su.bins.rlctl, "serve",
		"-grpc", s.grpcAddr, "-http", loopback(ports[1]), "-redis", "redis://"+su.redisAddr,
		"-timeout", "10s", "-no-headers", "-log-level", "warn", policy)
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + su.dir}
	return s, s.start(su.dir, "rlctl.log")
}

// startRatelimit starts envoyproxy/ratelimit on ratelimit.yaml with its limits raised,
// configured as its README says, by environment variables.
func startRatelimit(ctx context.Context, su setup) (*service, error) {
	root := filepath.Join(su.dir, "runtime")
	if err := raise(filepath.Join(su.testdata, "ratelimit.yaml"), filepath.Join(root, "ratelimit", "config", "edge.yaml"), `(?m)^(\s*requests_per_unit:\s*)\d+$`, su.limit); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s := &service{name: "envoyproxy/ratelimit", grpcAddr: loopback(ports[0])}
	s.cmd = exec.CommandContext(ctx, su.bins.ratelimit)
	s.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + su.dir,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=config",
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + su.redisAddr,
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[0]),
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		"USE_STATSD=false", "LOG_LEVEL=warn",
	}
	return s, s.start(su.dir, "ratelimit.log")
}

// raise copies the config at src to dst with every number that re matches (its first
// group before it) set to limit; it fails unless there are exactly three.
func raise(src, dst, re string, limit int) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	r := regexp.MustCompile(re)
	if n := len(r.FindAll(b, -1)); n != 3 {
		return fmt.Errorf("%s: %d limits, want 3", src, n)
	}
	b = r.ReplaceAll(b, []byte("${1}"+strconv.Itoa(limit)))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// freePorts returns n distinct loopback ports nothing listens on now.
func freePorts(n int) ([]int, error) {
	var ps []int
	for len(ps) < n {
		p, err := redisproc.FreePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps, nil
}

// start runs the command with its output in dir/log, to be killed by the kernel if this
// program dies (Linux), and connects a gRPC client.
func (s *service) start(dir, log string) error {
	s.logPath = filepath.Join(dir, log)
	f, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	s.cmd.Stdout, s.cmd.Stderr = f, f
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.done = make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	s.conn, err = grpc.NewClient("passthrough:///"+s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	s.rls = rlsv3.NewRateLimitServiceClient(s.conn)
	return nil
}

func (s *service) pid() int { return s.cmd.Process.Pid }

// ready waits until the service decides with the configured limit, then checks that a
// second call for the same address has one less remaining: both count on Redis.
func (s *service) ready(ctx context.Context, limit int) error {
	probe := request(1, "192.0.2.1", "", "")
	deadline := time.Now().Add(readyTimeout)
	var last error
	for {
		resp, err := s.call(ctx, probe)
		if err == nil && resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == uint32(limit) {
			next, err := s.call(ctx, probe)
			if err != nil {
				return err
			}
			if r0, r1 := resp.Statuses[0].LimitRemaining, next.GetStatuses()[0].GetLimitRemaining(); r1 != r0-1 {
				return fmt.Errorf("remaining %d then %d: the service does not count", r0, r1)
			}
			return nil
		}
		if err == nil {
			err = fmt.Errorf("not the configured limit yet: %v", resp)
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", readyTimeout, last)
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited: %v", s.cmd.ProcessState)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *service) call(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := s.rls.ShouldRateLimit(ctx, req)
	if err == nil && len(resp.GetStatuses()) != len(req.Descriptors) {
		err = fmt.Errorf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(req.Descriptors))
	}
	return resp, err
}

// stop closes the client and ends the process with SIGTERM (SIGKILL after stopTimeout).
func (s *service) stop() {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.done == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// tail is the end of the service's log.
func (s *service) tail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// request is an Envoy request of the edge domain: the address alone (shape 1), or with the
// API path and the tenant (shape 3).
func request(shape int, addr, path, tenant string) *rlsv3.RateLimitRequest {
	r := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", addr)}}
	if shape == 3 {
		r.Descriptors = append(r.Descriptors, desc("generic_key", "api", "path", path), desc("tenant", tenant))
	}
	return r
}

func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}
