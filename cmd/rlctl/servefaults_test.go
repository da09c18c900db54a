package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/internal/syncbuf"
	"github.com/rlctl/rlctl/serve"
)

// The service fault suite runs `rlctl serve` as a process of its own (the test binary
// re-executed as rlctl: testscript.Main puts it on PATH), on the embedded backend and on a
// real redis-server, under 32 concurrent gRPC clients in bounded loops, and breaks what is
// around it: its policy files, its callers, its file descriptors, its shutdown. Each fault
// asserts the service's promise; the figures are logged and, with RLCTL_RELIABILITY=FILE,
// appended to FILE (RELIABILITY.md's service table).

const (
	sfClients  = 32                   // concurrent gRPC clients of the load
	sfMaxCalls = 5_000                // per client: the load loop ends at stop or here
	sfPace     = 2 * time.Millisecond // a client's pause between calls
	sfCallWait = 5 * time.Second      // a call's deadline: no call of a healthy service nears it
	sfLimit    = 300                  // the rule's limit per client key, per hour
	sfReload   = 10 * time.Second     // how long a reload may take to be reported
	sfPolicy   = "faults.hcl"         // the policy file's name in the test's directory
	sfDomain   = "faults"             // the requests' domain
)

// sfPolicyText is the suite's policy: per client key, r (gcra, a burst of sfLimit and 1
// an hour, or fixed_window, sfLimit an hour: either way the allowed calls of a key during
// the test are exactly min(calls, sfLimit)) and s (a gcra rule nobody reaches, so that a policy without r still
// has a rule). algR is r's algorithm; "" leaves r out.
func sfPolicyText(algR string) string {
	var r string
	switch algR {
	case "fixed_window":
		r = fmt.Sprintf(`
  rule "r" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = %d
    window    = "1h"
  }
`, sfLimit)
	case "gcra":
		r = fmt.Sprintf(`
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/h"
    burst     = %d
  }
`, sfLimit)
	}
	return fmt.Sprintf(`# The service fault suite's policy.
policy "faults" {
  match    = request.domain == %q
  on_error = "deny"
%s
  rule "s" {
    algorithm = "gcra"
    key       = request.user
    rate      = "100000/h"
    burst     = 100000
  }
}
`, sfDomain, r)
}

// serveProc is one `rlctl serve` process.
type serveProc struct {
	cmd                *exec.Cmd
	grpc, http, admin  string
	logs               syncbuf.Buffer
	exited             chan struct{} // closed when the process has exited
	exitErr            error         // its Wait's error, once exited
	startedAt, readyAt time.Time

	// msgs are the messages of its log lines, in order, and ended is set once its log has
	// ended; waitMsg waits on them through cond.
	mu    sync.Mutex
	cond  *sync.Cond
	msgs  []string
	ended bool
}

// msgCount is how many log lines the process has written.
func (p *serveProc) msgCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs)
}

// waitMsg waits until a log line from the from-th on has a message that match accepts, and
// returns the count of lines up to it. It fails the test when the log ends first; nothing
// else bounds it but the test's -timeout.
func (p *serveProc) waitMsg(t *testing.T, from int, what string, match func(msg string) bool) int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; ; {
		for ; i < len(p.msgs); i++ {
			if match(p.msgs[i]) {
				return i + 1
			}
		}
		if p.ended {
			t.Fatalf("rlctl serve's log ended before %s", what)
		}
		p.cond.Wait()
	}
}

// startServeProc starts `rlctl serve` on loopback ports of its own with args (flags, then the
// policy paths). nofile > 0 starts it under `ulimit -n nofile` (soft and hard), through
// sh. The process is killed at the test's cleanup if it is still running.
func startServeProc(t *testing.T, nofile int, args ...string) *serveProc {
	t.Helper()
	bin, err := exec.LookPath("rlctl")
	if err != nil {
		t.Fatalf("rlctl is not on PATH (testscript.Main puts the test binary there): %v", err)
	}
	// -log-level debug: every reload's outcome is a line (an unchanged one at debug), which
	// waitMsg waits on.
	argv := append([]string{"serve", "-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-log-level", "debug"}, args...)
	var cmd *exec.Cmd
	if nofile > 0 {
		cmd = exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), bin}, argv...)...)
	} else {
		cmd = exec.Command(bin, argv...)
	}
	// Its environment, less any RLCTL_ flag variable of the machine's.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RLCTL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	p := &serveProc{cmd: cmd, exited: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = &p.logs
	p.startedAt = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			var l struct{ Msg, GRPC, HTTP, Admin string }
			_ = json.Unmarshal([]byte(line), &l)
			p.mu.Lock()
			p.msgs = append(p.msgs, l.Msg)
			p.cond.Broadcast()
			p.mu.Unlock()
			if l.Msg == "rlctl serve: serving" {
				p.grpc, p.http, p.admin = l.GRPC, l.HTTP, l.Admin
				if p.admin == "" { // a version before -admin: /metrics is on -http
					p.admin = p.http
				}
				once.Do(func() { p.readyAt = time.Now(); close(ready) })
			}
		}
		p.mu.Lock()
		p.ended = true
		p.cond.Broadcast()
		p.mu.Unlock()
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("rlctl serve's log:\n%s", sfTail(p.logs.String(), 40))
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("rlctl serve exited before serving (%v):\n%s", p.exitErr, p.logs.String())
	}
	return p
}

// sfTail is the last n lines of s.
func sfTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// signal sends sig to the process.
func (p *serveProc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// metrics reads the admin listener's exposition: each series (name and labels as
// written) to its value.
func (p *serveProc) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// metricSum adds every series of the metric name.
func metricSum(m map[string]float64, name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// reloads is how many reloads serve has attempted, ok or refused.
func (p *serveProc) reloads(t *testing.T) float64 {
	return metricSum(p.metrics(t), "rlctl_config_reloads_total")
}

// grpcConn dials the process's gRPC listener.
func (p *serveProc) grpcConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient("passthrough:///"+p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sfRequest is client key's request.
func sfRequest(key string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: sfDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: key}}},
	}}
}

// sfLoad is sfClients gRPC clients, each on a connection and a key of its own, calling
// ShouldRateLimit in a bounded loop until stopped.
type sfLoad struct {
	run     string
	stop    chan struct{}
	wg      sync.WaitGroup
	phase   atomic.Int32 // what a call is counted under (its index in clients[i].lat)
	clients []sfClient

	// answered counts each client's answered calls (-1 once it has stopped), for
	// waitRound; guarded by mu, signalled on cond.
	mu       sync.Mutex
	cond     *sync.Cond
	answered []int
}

// sfRounds is how many rounds of answers (every client answered once more) a phase of
// the load lasts: about 100-200 ms of calls at sfPace, counted in answers, not time.
const sfRounds = 40

// rounds is n waitRounds.
func (l *sfLoad) rounds(n int) {
	for range n {
		l.waitRound()
	}
}

// untilOver runs rounds until some call has been over the limit, at most sfLimit+1 of
// them: each answers every client once more, so by then each key has passed its limit.
func (l *sfLoad) untilOver() {
	for range sfLimit + 1 {
		if l.totals().over > 0 {
			return
		}
		l.waitRound()
	}
}

// waitRound waits until every client still running has been answered at least once more.
func (l *sfLoad) waitRound() {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := slices.Clone(l.answered)
	for i := 0; i < len(before); {
		if n := l.answered[i]; n < 0 || n > before[i] {
			i++
			continue
		}
		l.cond.Wait()
	}
}

// answer records an answered call of client i, or that it stopped (stopped).
func (l *sfLoad) answer(i int, stopped bool) {
	l.mu.Lock()
	if stopped {
		l.answered[i] = -1
	} else {
		l.answered[i]++
	}
	l.cond.Broadcast()
	l.mu.Unlock()
}

// sfClient is what one client saw; written only by its goroutine until the load stops.
type sfClient struct {
	calls, ok, over int
	noRule          int                // OK without the rule's limit: decided by no rule
	codes           map[codes.Code]int // calls that failed, by code
	firstErr        error
	lat             [3][]time.Duration // by phase: 0 before the fault, 1 during, 2 after
	lastBad         time.Time          // when the last call that failed or was over the limit returned
}

// startLoad starts the clients on p; run prefixes their keys.
func startLoad(t *testing.T, p *serveProc, run string) *sfLoad {
	l := &sfLoad{run: run, stop: make(chan struct{}), clients: make([]sfClient, sfClients), answered: make([]int, sfClients)}
	l.cond = sync.NewCond(&l.mu)
	for i := range sfClients {
		conn := p.grpcConn(t)
		rls := rlsv3.NewRateLimitServiceClient(conn)
		c := &l.clients[i]
		c.codes = map[codes.Code]int{}
		req := sfRequest(l.key(i))
		l.wg.Go(func() {
			defer l.answer(i, true)
			for range sfMaxCalls {
				select {
				case <-l.stop:
					return
				default:
				}
				phase := l.phase.Load()
				ctx, cancel := context.WithTimeout(context.Background(), sfCallWait)
				start := time.Now()
				resp, err := rls.ShouldRateLimit(ctx, req)
				took := time.Since(start)
				cancel()
				l.answer(i, false)
				c.calls++
				c.lat[phase] = append(c.lat[phase], took)
				switch {
				case err != nil:
					c.lastBad = time.Now()
					c.codes[status.Code(err)]++
					if c.firstErr == nil {
						c.firstErr = err
					}
				case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
					c.lastBad = time.Now()
					c.over++
				default:
					c.ok++
					if len(resp.Statuses) != 1 || resp.Statuses[0].CurrentLimit == nil {
						c.noRule++
					}
				}
				time.Sleep(sfPace/2 + time.Duration(i)*sfPace/sfClients)
			}
		})
	}
	return l
}

func (l *sfLoad) key(i int) string { return fmt.Sprintf("%s-c%02d", l.run, i) }

// isReloadOutcome reports the log messages that end a reload: loaded, refused, unchanged.
func isReloadOutcome(msg string) bool {
	switch msg {
	case "rlctl serve: policies reloaded", "rlctl serve: reload refused; the running policies stay", "rlctl serve: policies unchanged":
		return true
	}
	return false
}

// halt stops the clients and waits for them.
func (l *sfLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// sfTotals is the load's figures, summed over the clients.
type sfTotals struct {
	calls, ok, over, noRule, failed int
	codes                           map[codes.Code]int
	firstErr                        error
	maxAllowed                      int // the most calls allowed on one key
	pastLimit                       int // calls allowed past sfLimit, summed over the keys
}

func (l *sfLoad) totals() sfTotals {
	s := sfTotals{codes: map[codes.Code]int{}}
	for i := range l.clients {
		c := &l.clients[i]
		s.calls += c.calls
		s.ok += c.ok
		s.over += c.over
		s.noRule += c.noRule
		for k, n := range c.codes {
			s.codes[k] += n
			s.failed += n
		}
		if s.firstErr == nil {
			s.firstErr = c.firstErr
		}
		s.maxAllowed = max(s.maxAllowed, c.ok)
		s.pastLimit += max(0, c.ok-sfLimit)
	}
	return s
}

// p99 is the 99th percentile of the calls counted under phase.
func (l *sfLoad) p99(phase int) time.Duration {
	var all []time.Duration
	for i := range l.clients {
		all = append(all, l.clients[i].lat[phase]...)
	}
	if len(all) == 0 {
		return 0
	}
	slices.Sort(all)
	return all[min(len(all)-1, len(all)*99/100)]
}

// sfRow is one line of the service table: what a fault measured.
type sfRow struct {
	fault, backend       string
	calls, failed        int
	noRule               int // calls answered OK by no rule
	pastLimit            int // calls allowed on a key past its limit, summed over the keys
	degraded             int // decisions made by on_error (rlctl_degraded_total)
	p99Before, p99During time.Duration
	recovery             string // time to recover, where the fault has one
	note                 string
}

// sfRows collects the suite's rows for the report.
var (
	sfRowsMu sync.Mutex
	sfRows   []sfRow
)

func addRow(t *testing.T, r sfRow) {
	if r.recovery == "" {
		r.recovery = "—"
	}
	t.Logf("%s (%s): %d calls, %d failed, %d decided by no rule, %d allowed past the limit, %d by on_error; p99 %v before, %v during; recovery %s; %s",
		r.fault, r.backend, r.calls, r.failed, r.noRule, r.pastLimit, r.degraded, r.p99Before, r.p99During, r.recovery, r.note)
	sfRowsMu.Lock()
	sfRows = append(sfRows, r)
	sfRowsMu.Unlock()
}

// reportServeFaults logs the table and appends it to $RLCTL_RELIABILITY when set.
func reportServeFaults(t *testing.T) {
	var b strings.Builder
	b.WriteString("| fault | backend | calls | failed | decided by no rule | allowed past the limit | decided by on_error | p99 before | p99 during | recovery | also measured |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	for _, r := range sfRows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %s | %s | %s | %s |\n", r.fault, r.backend, r.calls, r.failed, r.noRule,
			r.pastLimit, r.degraded, ms(r.p99Before), ms(r.p99During), r.recovery, r.note)
	}
	t.Logf("TestServeFaults\n%s", b.String())
	if path := os.Getenv("RLCTL_RELIABILITY"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Errorf("RLCTL_RELIABILITY: %v", err)
			return
		}
		defer f.Close()
		fmt.Fprintf(f, "### TestServeFaults: rlctl serve as a process\n\n%s\n", b.String())
	}
}

// TestServeFaults is the service fault suite (see the top of this file). It runs without
// the race detector (make proofs): it drives a separate process, which -race would only
// slow down.
func TestServeFaults(t *testing.T) {
	if raceEnabled {
		t.Skip("drives rlctl serve processes under load; run without the race detector (make proofs)")
	}
	if testing.Short() {
		t.Skip("starts rlctl serve processes")
	}
	sfRows = nil
	redis := func(t *testing.T) []string {
		return []string{"-redis", "redis://" + redistest.Start(t).Addr(), "-timeout", "1s"}
	}
	t.Run("reloads/embedded", func(t *testing.T) { testReloadFaults(t, "embedded", nil) })
	t.Run("reloads/redis", func(t *testing.T) { testReloadFaults(t, "redis", redis(t)) })
	t.Run("hostile/embedded", func(t *testing.T) { testHostileRequests(t, "embedded", nil) })
	t.Run("hostile/redis", func(t *testing.T) { testHostileRequests(t, "redis", redis(t)) })
	t.Run("idle clients at an fd limit", testIdleClients)
	t.Run("SIGTERM with a health watcher", testShutdownWithWatcher)
	t.Run("cluster primary killed", testClusterFailover)
	reportServeFaults(t)
}

// testReloadFaults: reloads under load, on a policy file broken in each way an operator
// or an editor breaks one while SIGHUP lands, and the two-step algorithm change. The
// promise: no call is ever decided with fewer rules than intended (no OK without the
// rule's limit, no key allowed past its limit, no no_rules decision), and no call fails
// or is decided by on_error (WRONGTYPE, fail_deny).
func testReloadFaults(t *testing.T, backend string, flags []string) {
	dir := t.TempDir()
	path := filepath.Join(dir, sfPolicy)
	full := sfPolicyText("gcra")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(full)
	p := startServeProc(t, 0, append(flags, "-drain", "5s", path)...)
	l := startLoad(t, p, "reload")
	defer l.halt()

	// reload sends SIGHUP and waits until serve has logged the reload's outcome (loaded,
	// refused or unchanged: -log-level debug), then until every client has been answered
	// once more, so each step is seen by the load.
	reload := func() {
		t.Helper()
		from := p.msgCount()
		p.signal(t, syscall.SIGHUP)
		p.waitMsg(t, from, "the SIGHUP's reload", isReloadOutcome)
		l.waitRound()
	}
	l.rounds(sfRounds) // the load, before any fault
	l.phase.Store(1)
	steps := []struct {
		name  string
		apply func()
	}{
		{"emptied", func() { write(""); reload() }},
		{"comment only", func() { write("# policies are being rewritten\n"); reload() }},
		{"truncated mid-file", func() { write(full[:len(full)/2]); reload() }},
		{"truncated at a rule's end", func() { write(full[:strings.Index(full, `  rule "s"`)]); reload() }},
		{"rewritten in place byte by byte, SIGHUP every 16 bytes", func() {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for i := range len(full) {
				if _, err := f.Write([]byte{full[i]}); err != nil {
					t.Fatal(err)
				}
				if i%16 == 0 {
					reload()
				}
			}
		}},
	}
	for _, s := range steps {
		s.apply()
		write(full)
		reload()
		if tot := l.totals(); tot.noRule > 0 || tot.failed > 0 || tot.maxAllowed > sfLimit {
			t.Errorf("after the reload of a policy file %s: %d calls decided by no rule, %d failed (%v; first %v), a key allowed %d times (limit %d)",
				s.name, tot.noRule, tot.failed, tot.codes, tot.firstErr, tot.maxAllowed, sfLimit)
		}
	}
	// The load reaches the limit whatever the machine's speed made of the steps: rounds go
	// on until a call is over it (after sfLimit+1 rounds every client has passed it).
	l.untilOver()
	faulty := l.totals()

	// The two-step algorithm change: r removed, then r back with another algorithm. A new
	// algorithm may start on keys of its own (the policy's counters for r start again), so
	// a key may be allowed up to twice the limit; it must never fail or be misread.
	l.phase.Store(2)
	write(sfPolicyText(""))
	reload()
	write(sfPolicyText("fixed_window"))
	reload()
	l.rounds(sfRounds)
	l.halt()
	tot := l.totals()
	m := p.metrics(t)
	degraded := metricSum(m, "rlctl_degraded_total")
	var bySource []string
	for _, src := range []string{"no_rules", "fail_open", "fail_deny", "local"} {
		n := m[`rlctl_requests_total{outcome="allowed",source="`+src+`"}`] + m[`rlctl_requests_total{outcome="denied",source="`+src+`"}`]
		if n > 0 {
			bySource = append(bySource, fmt.Sprintf("%s %v", src, n))
		}
	}
	if tot.noRule > 0 || tot.failed > 0 || degraded > 0 || len(bySource) > 0 {
		t.Errorf("the two-step algorithm change: %d calls decided by no rule, %d failed (%v; first %v), %v degraded decisions; by source: %v",
			tot.noRule, tot.failed, tot.codes, tot.firstErr, degraded, bySource)
	}
	if tot.maxAllowed > 2*sfLimit {
		t.Errorf("a key allowed %d times across the algorithm change, more than twice the limit %d", tot.maxAllowed, sfLimit)
	}
	if faulty.over == 0 {
		t.Errorf("no call was over the limit: the load did not reach the rule's limit (%d calls)", faulty.calls)
	}
	ok, failed := m[`rlctl_config_reloads_total{result="ok"}`], m[`rlctl_config_reloads_total{result="failed"}`]
	addRow(t, sfRow{fault: "reloads: emptied, comment only, truncated ×2, rewritten in place (SIGHUP every 16 bytes); then r (gcra) removed and added back as fixed_window",
		backend: backend, calls: tot.calls, failed: tot.failed, noRule: tot.noRule, pastLimit: faulty.pastLimit, degraded: int(degraded),
		p99Before: l.p99(0), p99During: l.p99(1),
		note: fmt.Sprintf("%v reloads ok, %v refused; the most allowed on a key: %d before the algorithm change (limit %d), %d after it",
			ok, failed, faulty.maxAllowed, sfLimit, tot.maxAllowed)})
	if backend == "redis" {
		restartWithAnotherAlgorithm(t, p, flags, path)
	}
}

// restartWithAnotherAlgorithm: the service stopped and started again on the same Redis
// with r back to gcra, as a deploy of a new file would: the keys r's fixed_window wrote
// are there. The promise: no call fails or is decided by on_error (WRONGTYPE, a state
// misread as another algorithm's).
func restartWithAnotherAlgorithm(t *testing.T, p *serveProc, flags []string, path string) {
	p.signal(t, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(sfExit):
		t.Fatalf("rlctl serve had not exited %v after SIGTERM", sfExit)
	}
	if err := os.WriteFile(path, []byte(sfPolicyText("gcra")), 0o644); err != nil {
		t.Fatal(err)
	}
	q := startServeProc(t, 0, append(flags, path)...)
	l := startLoad(t, q, "reload") // the keys of the run before
	l.rounds(sfRounds)
	l.halt()
	tot := l.totals()
	degraded := metricSum(q.metrics(t), "rlctl_degraded_total")
	if tot.failed > 0 || tot.noRule > 0 || degraded > 0 {
		t.Errorf("restarted with r as gcra on fixed_window's keys: %d calls failed (%v; first %v), %d decided by no rule, %v by on_error",
			tot.failed, tot.codes, tot.firstErr, tot.noRule, degraded)
	}
	addRow(t, sfRow{fault: "restart on the same Redis with r back to gcra (fixed_window's keys there)", backend: "redis",
		calls: tot.calls, failed: tot.failed, noRule: tot.noRule, degraded: int(degraded), p99Before: l.p99(0), p99During: l.p99(0),
		note: fmt.Sprintf("the most allowed on a key %d: r's gcra state from before the change, spent, is read again, and fixed_window's is not misread", tot.maxAllowed)})
}

// rawCodec sends a request's bytes as they are, so that a test can send what grpc-go's
// proto codec refuses to marshal (a string that is not UTF-8), and reads the reply's bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// protoRequest encodes a RateLimitRequest of domain and descriptors (each a list of
// key, value pairs) by hand: field 1 the domain, 2 each descriptor, whose field 1 is each
// entry (1 key, 2 value).
func protoRequest(domain string, descriptors [][][2]string) []byte {
	field := func(b []byte, num int, s []byte) []byte {
		b = append(b, byte(num<<3|2))
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
	b := field(nil, 1, []byte(domain))
	for _, d := range descriptors {
		var db []byte
		for _, e := range d {
			db = field(db, 1, field(field(nil, 1, []byte(e[0])), 2, []byte(e[1])))
		}
		b = field(b, 2, db)
	}
	return b
}

// hostileGRPC are the hostile ShouldRateLimit calls and the code each must get.
func hostileGRPC() []struct {
	name string
	req  []byte
	want codes.Code
} {
	user := func(v string) [][2]string { return [][2]string{{"user", v}} }
	many := func(n int) [][][2]string {
		ds := make([][][2]string, n)
		for i := range ds {
			ds[i] = user(fmt.Sprint("h", i))
		}
		return ds
	}
	wide := make([][2]string, serve.MaxEntries+1)
	for i := range wide {
		wide[i] = [2]string{fmt.Sprint("k", i), "v"}
	}
	return []struct {
		name string
		req  []byte
		want codes.Code
	}{
		{"MaxDescriptors+1 descriptors", protoRequest(sfDomain, many(serve.MaxDescriptors+1)), codes.InvalidArgument},
		{"100,000 descriptors (2.4 MB)", protoRequest(sfDomain, many(100_000)), codes.ResourceExhausted},
		{"MaxEntries+1 entries", protoRequest(sfDomain, [][][2]string{wide}), codes.InvalidArgument},
		{"a value of MaxValueBytes+1", protoRequest(sfDomain, [][][2]string{user(strings.Repeat("x", serve.MaxValueBytes+1))}), codes.InvalidArgument},
		{"a domain of MaxNameBytes+1", protoRequest(strings.Repeat("d", serve.MaxNameBytes+1), [][][2]string{user("u")}), codes.InvalidArgument},
		{"an invalid UTF-8 value", protoRequest(sfDomain, [][][2]string{user("\xff\xfe")}), codes.InvalidArgument},
	}
}

// hostileHTTP are the hostile HTTP API calls and the status each must get.
func hostileHTTP() []struct {
	name, contentType, body string
	want                    int
} {
	attrs := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"attributes": {"domain": "` + sfDomain + `"`)
		for i := range n {
			fmt.Fprintf(&b, `, "a%d": "v"`, i)
		}
		return b.String() + "}}"
	}
	batch := `{"requests": [` + strings.Repeat(`{"attributes": {"domain": "`+sfDomain+`", "user": "h"}},`, serve.MaxBatch) + `{"attributes": {"user": "h"}}]}`
	return []struct {
		name, contentType, body string
		want                    int
	}{
		{"a body past MaxBodyBytes", "application/json", `{"attributes": {"user": "` + strings.Repeat("x", serve.MaxBodyBytes) + `"}}`, http.StatusRequestEntityTooLarge},
		{"text/plain", "text/plain", `{"attributes": {"domain": "` + sfDomain + `", "user": "h"}}`, http.StatusUnsupportedMediaType},
		{"no content type", "", `{"attributes": {"domain": "` + sfDomain + `", "user": "h"}}`, http.StatusUnsupportedMediaType},
		{"invalid UTF-8", "application/json", `{"attributes": {"domain": "` + sfDomain + `", "user": "` + "\xff" + `"}}`, http.StatusBadRequest},
		{"a lone surrogate escape", "application/json", `{"attributes": {"domain": "` + sfDomain + `", "user": "\udc00"}}`, http.StatusBadRequest},
		{"MaxAttributes+1 attributes", "application/json", attrs(serve.MaxAttributes), http.StatusBadRequest},
		{"a value of MaxValueBytes+1", "application/json", `{"attributes": {"domain": "` + sfDomain + `", "user": "` + strings.Repeat("x", serve.MaxValueBytes+1) + `"}}`, http.StatusBadRequest},
		{"MaxBatch+1 requests", "application/json", batch, http.StatusBadRequest},
	}
}

// sfSlowdown is how much slower the other callers' p99 may be during a fault than before
// it: a generous ratio for a shared 2-core machine; a call that stalls the service shows
// as seconds, not as a ratio of milliseconds. The floor keeps a sub-millisecond baseline
// from making scheduling noise a failure.
const (
	sfSlowdown      = 10
	sfSlowdownFloor = 250 * time.Millisecond
)

// testHostileRequests: hostile calls on both interfaces, in a loop beside the load. The
// promise: each is refused with its documented code (InvalidArgument / ResourceExhausted
// over gRPC; 400 / 413 / 415 over HTTP), and the other callers are decided as before,
// their p99 within sfSlowdown of what it was before.
func testHostileRequests(t *testing.T, backend string, flags []string) {
	dir := t.TempDir()
	path := filepath.Join(dir, sfPolicy)
	if err := os.WriteFile(path, []byte(sfPolicyText("gcra")), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServeProc(t, 0, append(flags, path)...)
	l := startLoad(t, p, "hostile")
	defer l.halt()
	l.rounds(sfRounds)
	l.phase.Store(1)

	conn := p.grpcConn(t)
	grpcCases, httpCases := hostileGRPC(), hostileHTTP()
	var sent atomic.Int64
	var wrong []string
	var mu sync.Mutex
	bad := func(format string, args ...any) {
		mu.Lock()
		if len(wrong) < 10 {
			wrong = append(wrong, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}
	var hwg sync.WaitGroup
	until := time.Now().Add(1500 * time.Millisecond)
	hwg.Go(func() {
		for n := 0; n < 10_000 && time.Now().Before(until); n++ {
			c := grpcCases[n%len(grpcCases)]
			var out []byte
			ctx, cancel := context.WithTimeout(context.Background(), sfCallWait)
			err := conn.Invoke(ctx, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &c.req, &out, grpc.ForceCodecV2(nil), grpc.ForceCodec(rawCodec{}))
			cancel()
			sent.Add(1)
			if status.Code(err) != c.want {
				bad("gRPC %s: %v, want %v", c.name, err, c.want)
			}
		}
	})
	hwg.Go(func() {
		client := &http.Client{Timeout: sfCallWait}
		for n := 0; n < 10_000 && time.Now().Before(until); n++ {
			c := httpCases[n%len(httpCases)]
			req, _ := http.NewRequest("POST", "http://"+p.http+"/v1/decide", strings.NewReader(c.body))
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			resp, err := client.Do(req)
			sent.Add(1)
			if err != nil {
				bad("HTTP %s: %v", c.name, err)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				bad("HTTP %s: %d, want %d", c.name, resp.StatusCode, c.want)
			}
		}
	})
	hwg.Wait()
	l.phase.Store(2)
	l.rounds(sfRounds)
	l.halt()
	for _, w := range wrong {
		t.Errorf("a hostile request was not refused as documented: %s", w)
	}
	tot := l.totals()
	before, during := l.p99(0), l.p99(1)
	if tot.failed > 0 || tot.noRule > 0 {
		t.Errorf("the other callers: %d calls failed (%v; first %v), %d decided by no rule", tot.failed, tot.codes, tot.firstErr, tot.noRule)
	}
	if bound := max(sfSlowdown*before, sfSlowdownFloor); during > bound {
		t.Errorf("the other callers' p99 was %v during the hostile requests, %v before: more than %d× (or %v)", during, before, sfSlowdown, sfSlowdownFloor)
	}
	addRow(t, sfRow{fault: "hostile requests, gRPC and HTTP, one of each kind after another", backend: backend,
		calls: tot.calls, failed: tot.failed, noRule: tot.noRule, pastLimit: tot.pastLimit, degraded: int(metricSum(p.metrics(t), "rlctl_degraded_total")),
		p99Before: before, p99During: during,
		note: fmt.Sprintf("%d hostile requests, %d not refused as documented; p99 during ÷ before %.1f (bound %d)",
			sent.Load(), len(wrong), float64(during)/float64(max(before, 1)), sfSlowdown)})
}

const (
	sfNofile     = 1024 // serve's file descriptor limit in testIdleClients
	sfIdle       = 1000 // kept-alive HTTP connections left idle after one request
	sfTrickle    = 100  // HTTP connections trickling a body, a byte every sfTrickleGap
	sfTrickleGap = 200 * time.Millisecond
	sfNewClients = 8 // fresh gRPC clients that must be answered meanwhile
)

// testIdleClients: rlctl serve under `ulimit -n 1024`, 1,000 kept-alive HTTP connections
// idle after a request and 100 trickling a body (1,100: more than its descriptors), with
// the load running. The promise: a new gRPC client still gets answers, and the load's
// calls do not fail.
func testIdleClients(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, sfPolicy)
	if err := os.WriteFile(path, []byte(sfPolicyText("gcra")), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServeProc(t, sfNofile, path)
	l := startLoad(t, p, "idle")
	defer l.halt()
	l.rounds(sfRounds)
	l.phase.Store(1)

	var conns []net.Conn
	var mu sync.Mutex
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	hold := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	body := `{"attributes": {"domain": "` + sfDomain + `", "user": "idle"}}`
	request := "POST /v1/decide HTTP/1.1\r\nHost: rlctl\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	var answered, refused atomic.Int64 // idle connections: a first answer; closed or not accepted
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range 16 {
		wg.Go(func() {
			for range jobs {
				c, err := net.DialTimeout("tcp", p.http, 2*time.Second)
				if err != nil {
					refused.Add(1)
					continue
				}
				hold(c)
				c.SetDeadline(time.Now().Add(2 * time.Second))
				if _, err := io.WriteString(c, request); err != nil {
					refused.Add(1)
					continue
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					refused.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				answered.Add(1)
				c.SetDeadline(time.Time{}) // and now idle, kept alive
			}
		})
	}
	for i := range sfIdle {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	stopTrickle := make(chan struct{})
	var twg sync.WaitGroup
	var trickling atomic.Int64
	for range sfTrickle {
		c, err := net.DialTimeout("tcp", p.http, 2*time.Second)
		if err != nil {
			continue
		}
		hold(c)
		twg.Go(func() {
			if _, err := io.WriteString(c, "POST /v1/decide HTTP/1.1\r\nHost: rlctl\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"); err != nil {
				return
			}
			trickling.Add(1)
			for {
				select {
				case <-stopTrickle:
					return
				case <-time.After(sfTrickleGap):
				}
				if _, err := c.Write([]byte{' '}); err != nil {
					return
				}
			}
		})
	}
	defer func() { close(stopTrickle); twg.Wait() }()

	// Fresh gRPC clients, each on a new connection, while every connection above is held.
	var slowest time.Duration
	fresh := 0
	for i := range sfNewClients {
		c := p.grpcConn(t)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), sfCallWait)
		resp, err := rlsv3.NewRateLimitServiceClient(c).ShouldRateLimit(ctx, sfRequest(fmt.Sprint("fresh", i)))
		cancel()
		took := time.Since(start)
		slowest = max(slowest, took)
		if err == nil && resp.OverallCode == rlsv3.RateLimitResponse_OK {
			fresh++
		} else {
			t.Errorf("a new gRPC client with %d HTTP connections held (%d answered, %d trickling): %v %v after %v",
				len(conns), answered.Load(), trickling.Load(), resp, err, took)
		}
		c.Close()
	}
	l.rounds(sfRounds)
	l.phase.Store(2)
	l.halt()
	tot := l.totals()
	if tot.failed > 0 || tot.noRule > 0 {
		t.Errorf("the load: %d calls failed (%v; first %v), %d decided by no rule", tot.failed, tot.codes, tot.firstErr, tot.noRule)
	}
	addRow(t, sfRow{fault: fmt.Sprintf("%d kept-alive idle HTTP connections and %d trickling bodies under ulimit -n %d", sfIdle, sfTrickle, sfNofile),
		backend: "embedded", calls: tot.calls, failed: tot.failed, noRule: tot.noRule, pastLimit: tot.pastLimit,
		degraded: int(metricSum(p.metrics(t), "rlctl_degraded_total")), p99Before: l.p99(0), p99During: l.p99(1),
		note: fmt.Sprintf("of the idle ones %d answered and held, %d refused or closed at the connection cap; %d trickling; %d of %d new gRPC clients answered, the slowest in %v",
			answered.Load(), refused.Load(), trickling.Load(), fresh, sfNewClients, slowest.Round(100*time.Microsecond))})
}

const (
	sfInFlight = 8                // calls held in flight by a paused Redis at SIGTERM
	sfDrain    = 30 * time.Second // serve's -drain in testShutdownWithWatcher
	sfExit     = 10 * time.Second // how long after SIGTERM serve may take to exit
)

// testShutdownWithWatcher: SIGTERM while a client watches health (grpc.health.v1 Watch)
// and calls are in flight, held by a paused Redis. The promise: the watcher is told
// NOT_SERVING or its stream ends, the calls in flight finish (decided by Redis once it
// resumes), and the process exits 0 well before its -drain of 30 s.
func testShutdownWithWatcher(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, sfPolicy)
	if err := os.WriteFile(path, []byte(sfPolicyText("gcra")), 0o644); err != nil {
		t.Fatal(err)
	}
	// -redis-batch 1: each call goes alone, so that every call in flight waits at the
	// paused Redis (batched, all but one would wait in the service).
	p := startServeProc(t, 0, "-redis", "redis://"+rs.Addr(), "-redis-batch", "1", "-timeout", "20s", "-drain", sfDrain.String(), path)
	conn := p.grpcConn(t)
	rls := rlsv3.NewRateLimitServiceClient(conn)
	// As many calls at once as will be in flight: the service's Redis pool then holds a
	// connection for each (a new one would wait on the paused server's handshake).
	var warm sync.WaitGroup
	for i := range sfInFlight {
		warm.Go(func() {
			if _, err := rls.ShouldRateLimit(context.Background(), sfRequest(fmt.Sprint("warm", i))); err != nil {
				t.Errorf("a call on a healthy service: %v", err)
			}
		})
	}
	warm.Wait()
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	watch, err := healthpb.NewHealthClient(conn).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch: %v %v", h, err)
	}
	watched := make(chan string, 1)
	go func() {
		for {
			h, err := watch.Recv()
			if err != nil {
				watched <- fmt.Sprintf("stream ended (%v)", status.Code(err))
				return
			}
			if h.Status != healthpb.HealthCheckResponse_SERVING {
				watched <- h.Status.String()
				return
			}
		}
	}()

	// Calls in flight: Redis is paused, and each call's script waits in its socket.
	rs.Pause(t)
	type result struct {
		resp *rlsv3.RateLimitResponse
		err  error
	}
	results := make(chan result, sfInFlight)
	for i := range sfInFlight {
		go func() {
			resp, err := rls.ShouldRateLimit(context.Background(), sfRequest(fmt.Sprint("inflight", i)))
			results <- result{resp, err}
		}()
	}
	for wait := time.Now().Add(sfReload); queuedAt(t, rs.Addr()) < sfInFlight; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("the %d calls did not reach the paused Redis within %v (%d connections with a queued request)", sfInFlight, sfReload, queuedAt(t, rs.Addr()))
		}
	}
	term := time.Now()
	p.signal(t, syscall.SIGTERM)
	var told string
	select {
	case told = <-watched:
	case <-time.After(sfExit):
		t.Errorf("the health watcher was told nothing within %v of SIGTERM", sfExit)
	}
	toldAfter := time.Since(term)
	// A new call now is refused, or, sent before the listener closed, decided.
	late := make(chan error, 1)
	go func() {
		_, err := rls.ShouldRateLimit(context.Background(), sfRequest("late"))
		late <- err
	}()
	rs.Resume()
	finished := 0
	for range sfInFlight {
		r := <-results
		if r.err != nil || len(r.resp.GetStatuses()) != 1 || r.resp.Statuses[0].CurrentLimit == nil {
			t.Errorf("a call in flight at SIGTERM: %v %v", r.resp, r.err)
			continue
		}
		finished++
	}
	select {
	case <-p.exited:
	case <-time.After(sfExit):
		t.Fatalf("rlctl serve had not exited %v after SIGTERM (its -drain is %v)", sfExit, sfDrain)
	}
	exitAfter := time.Since(term)
	newErr := <-late
	if p.exitErr != nil {
		t.Errorf("rlctl serve exited with %v after SIGTERM, want 0", p.exitErr)
	}
	addRow(t, sfRow{fault: "SIGTERM with a grpc.health.v1 Watch stream open and calls in flight (held by a paused Redis), -drain 30s",
		backend: "redis", calls: sfInFlight, failed: sfInFlight - finished, recovery: fmt.Sprintf("exited %v after SIGTERM", exitAfter.Round(time.Millisecond)),
		note: fmt.Sprintf("the watcher told %s %v after SIGTERM; a new call then: %v; %d of %d calls in flight finished, decided by Redis",
			told, toldAfter.Round(time.Millisecond), status.Code(newErr), finished, sfInFlight)})
}

// queuedAt counts the TCP connections to the loopback server at addr with bytes waiting
// in their receive queue (/proc/net/tcp): the requests a paused server has been sent.
func queuedAt(t *testing.T, addr string) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	pn, _ := strconv.Atoi(port)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatalf("the calls in flight are counted in /proc/net/tcp: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasSuffix(f[1], fmt.Sprintf(":%04X", pn)) {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":")
		if q, err := strconv.ParseUint(rx, 16, 64); err == nil && q > 0 {
			n++
		}
	}
	return n
}

// sfFailoverTarget is how soon after a replica's promotion every call should be decided
// by Redis again: the figure RELIABILITY.md reports each run against. sfFailoverBound,
// three times it, is what fails the test: a regression toward the slot map's minute-long
// refresh fails it, a slow moment of a shared two-core machine (one run of ten measured
// 5.55 s while other test binaries ran beside it) does not.
const (
	sfFailoverTarget = 5 * time.Second
	sfFailoverBound  = 3 * sfFailoverTarget
)

// testClusterFailover: a Redis Cluster of 3 masters with a replica each; under the load a
// master is killed (SIGKILL) and its replica promoted. The policy's one rule has a burst
// nobody reaches and on_error = "deny", so every OVER_LIMIT is a decision Redis did not
// make. The promise: every client is decided by Redis again within sfFailoverBound of the
// promotion, and no call fails.
func testClusterFailover(t *testing.T) {
	cl := redistest.StartReplicatedCluster(t, 3)
	dir := t.TempDir()
	path := filepath.Join(dir, sfPolicy)
	policy := fmt.Sprintf(`policy "faults" {
  match    = request.domain == %q
  on_error = "deny"
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/h"
    burst     = 100000
  }
}
`, sfDomain)
	if err := os.WriteFile(path, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	var master *redistest.Server
	for i := range cl.Addrs() {
		if role, err := cl.Node(i).Role(); err == nil && role == "master" {
			master = cl.Node(i)
			break
		}
	}
	if master == nil {
		t.Fatal("no master in the cluster")
	}
	replica := cl.ReplicaOf(t, master)
	// A deadline of 500ms: a fresh six-node cluster on a loaded two-core machine answered
	// a call or two past 100ms before any fault, which on_error = "deny" turned into
	// OVER_LIMIT and the check below into a failure of the setup, not of the failover.
	p := startServeProc(t, 0, "-redis", "redis://"+cl.Addrs()[0], "-redis-type", "cluster", "-timeout", "500ms", path)
	l := startLoad(t, p, "failover")
	defer l.halt()
	l.rounds(sfRounds)
	if tot := l.totals(); tot.over > 0 || tot.failed > 0 {
		t.Fatalf("before the kill: %d calls over the limit, %d failed (%v): the cluster did not serve", tot.over, tot.failed, tot.firstErr)
	}
	l.phase.Store(1)
	killed := time.Now()
	master.Kill(t)
	var promoted time.Time
	for wait := time.Now().Add(30 * time.Second); promoted.IsZero(); time.Sleep(20 * time.Millisecond) {
		if role, err := replica.Role(); err == nil && role == "master" {
			promoted = time.Now()
		} else if time.Now().After(wait) {
			t.Fatalf("the replica %s was not promoted within 30s of the kill", replica.Addr())
		}
	}
	// Then the load runs long enough to see the service recover, and for a while after.
	time.Sleep(sfFailoverBound + time.Second)
	l.phase.Store(2)
	time.Sleep(time.Second)
	l.halt()
	tot := l.totals()
	var last time.Time
	late := 0 // clients still decided without Redis a second after the promotion
	for i := range l.clients {
		b := l.clients[i].lastBad
		if b.After(last) {
			last = b
		}
		if b.Sub(promoted) > time.Second {
			late++
		}
	}
	recovered := max(0, last.Sub(promoted))
	lost, doubled := chargesAgainstAllowed(t, p, l, 100000)
	if recovered > sfFailoverBound {
		t.Errorf("a call was not decided by Redis %v after the replica's promotion (%v after the kill), more than %v; %d of %d clients were still decided without Redis a second after it",
			recovered.Round(time.Millisecond), promoted.Sub(killed).Round(time.Millisecond), sfFailoverBound, late, sfClients)
	}
	if tot.failed > 0 {
		t.Errorf("%d calls failed (%v; first %v): on_error = \"deny\" decides a failover", tot.failed, tot.codes, tot.firstErr)
	}
	addRow(t, sfRow{fault: "Redis Cluster (3 masters, a replica each): a master killed (SIGKILL) under the load; on_error = \"deny\"", backend: "redis cluster",
		calls: tot.calls, failed: tot.failed, noRule: tot.noRule, degraded: int(metricSum(p.metrics(t), "rlctl_degraded_total")),
		p99Before: l.p99(0), p99During: l.p99(1),
		recovery: fmt.Sprintf("%v after the promotion", recovered.Round(time.Millisecond)),
		note: fmt.Sprintf("the replica promoted %v after the kill; %d calls over the limit (each decided by on_error: the burst is out of reach); %d of %d clients still decided without Redis a second after the promotion; against the calls Redis allowed, the counters hold %d charges fewer (writes the replica had not received) and %d more (calls charged, then unanswered)",
			promoted.Sub(killed).Round(time.Millisecond), tot.over, late, sfClients, lost, doubled)})
}

// chargesAgainstAllowed peeks each client's key over the HTTP API (burst is the rule's)
// and compares the charge the backend holds with the calls it allowed: lost counts
// charges missing (allowed, yet not held), doubled charges held beyond the calls allowed.
// Measured, not asserted: a Redis replica is written asynchronously.
func chargesAgainstAllowed(t *testing.T, p *serveProc, l *sfLoad, burst int64) (lost, doubled int64) {
	t.Helper()
	for i := range l.clients {
		body := `{"attributes": {"domain": "` + sfDomain + `", "user": "` + l.key(i) + `"}}`
		var d struct {
			Source string
			Rules  []struct{ Remaining int64 }
		}
		for wait := time.Now().Add(sfReload); ; time.Sleep(20 * time.Millisecond) {
			resp, err := http.Post("http://"+p.http+"/v1/peek", "application/json", strings.NewReader(body))
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&d)
				resp.Body.Close()
			}
			if err == nil && d.Source == "backend" && len(d.Rules) == 1 {
				break
			}
			if time.Now().After(wait) {
				t.Errorf("peek of %s: not decided by the backend within %v: %+v %v", l.key(i), sfReload, d, err)
				return lost, doubled
			}
		}
		held, allowed := burst-d.Rules[0].Remaining, int64(l.clients[i].ok)
		lost += max(0, allowed-held)
		doubled += max(0, held-allowed)
	}
	return lost, doubled
}
