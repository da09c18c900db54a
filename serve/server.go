package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/cli"
	"github.com/rlctl/rlctl/luahost"
	"github.com/rlctl/rlctl/native"
)

// Server decides rate limits for other processes: Envoy's rate limit service over gRPC
// (RegisterGRPC) and a JSON API over HTTP (Handler), both on one engine whose policies
// Reload swaps while requests are being decided. It is safe for concurrent use.
type Server struct {
	paths   []string
	backend engine.Backend
	opts    []engine.Option
	log     *slog.Logger
	// reloaded is told of every reload attempt (a metrics hook); nil to skip.
	reloaded func(ok bool, policies, rules int)

	// headers: the fields of Envoy responses; shadowMode: never OVER_LIMIT overall.
	headers    Headers
	shadowMode bool
	// allowRemoval: a reload may drop policies and rules (Config.AllowRemoval).
	allowRemoval bool
	admin        func(*http.Request) bool
	// pause waits between two reads of the policy files (see read).
	pause func()

	cur    atomic.Pointer[state]
	reload sync.Mutex // one reload at a time
	leases leases
	// reservations are the reservations of /v1/decide's settle, kept for /v1/settle.
	reservations leases
	// xds is the client of Config.XDS; nil without.
	xds *xdsClient
	// stats counts the Envoy decisions' statistics once NewEnvoyStats has made it.
	stats atomic.Pointer[EnvoyStats]
	// rlqs counts the rate limit quota service's reports and assignments.
	rlqs rlqsStats
}

// state is one loaded policy set and the engine deciding it.
type state struct {
	cfg    *dsl.Config
	plan   *engine.Plan
	engine *engine.Engine
	at     time.Time
}

// Config says what a Server serves.
type Config struct {
	// Paths are policy files and directories, as rlctl validate takes them.
	Paths []string
	// Backend runs the engine script: engine.NewRedis, or engine.NewLocal for a single
	// instance with its state in process. The same backend serves every reload, so
	// counters live on across them.
	Backend engine.Backend
	// Engine options for every engine the server makes (timeout, breaker, hooks, clock).
	Engine []engine.Option
	// Logger receives reloads and their diagnostics (default: discarded).
	Logger *slog.Logger
	// Reloaded, when set, is called after every attempt to load the policies, the first
	// included, with whether it succeeded and the size of the running plan.
	Reloaded func(ok bool, policies, rules int)
	// Clock is the time leases expire on, and the clock of the on_error = "local" fallback
	// that every engine of the server shares (default time.Now). Give the engines the same
	// clock (engine.WithClock).
	Clock func() time.Time
	// Headers says which fields Envoy responses carry for Envoy to add to the client's
	// response (default: the RateLimit fields).
	Headers Headers
	// ShadowMode answers OK every Envoy request that would be over the limit, its
	// descriptors' statuses as they are (envoyproxy/ratelimit's SHADOW_MODE): limits are
	// counted and reported, never enforced. Nothing is charged for a request the policies
	// deny, shadowed or not.
	ShadowMode bool
	// LocalMaxMemory caps, in bytes, the counters the on_error = "local" fallback keeps in
	// process during a Redis outage (the least recently used keys are evicted past it,
	// luahost.AllKeysLRU); 0 means no cap. Not used when Backend is itself in process.
	LocalMaxMemory int64
	// AllowRemoval lets a reload drop a policy, or a rule of a policy it keeps: without it
	// such a reload is refused (ErrRemoval) and the running policies stay, since a file
	// cut short by a write in progress, or emptied by mistake, would otherwise turn those
	// limits off. Files with no policy at all are refused whatever it says (ErrNoPolicies).
	AllowRemoval bool
	// Admin, when set, says whether an HTTP request has the admin right, which POST
	// /v1/reset needs (rlctl serve: an "admin" token of -auth-tokens). Unset, nobody has
	// it and /v1/reset is refused.
	Admin func(*http.Request) bool
	// XDS, when set, is a management server that gives policies as well as, or instead
	// of, the files (Paths may then be empty); see XDS. New then returns once its first
	// configuration has loaded, and Close stops its client.
	XDS *XDS

	// pause, when set, replaces the wait between two reads of the files (tests).
	pause func()
}

// Headers are the response fields for Envoy to add to the client's response. The zero
// value is the RateLimit-Policy, RateLimit and Retry-After fields of the IETF draft
// (draft-ietf-httpapi-ratelimit-headers), as httplimit writes them.
type Headers struct {
	// Omit leaves every field out.
	Omit bool
	// Legacy, when set, writes envoyproxy/ratelimit's fields instead (its
	// LIMIT_RESPONSE_HEADERS_ENABLED): the limit, the remaining and the seconds to the
	// reset of the descriptor closest to its limit.
	Legacy *LegacyHeaders
}

// LegacyHeaders names envoyproxy/ratelimit's response fields (its LIMIT_LIMIT_HEADER,
// LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER).
type LegacyHeaders struct {
	Limit, Remaining, Reset string
}

// Errors of a load (New) or reload (Reload) that is refused; the running policies stay.
var (
	// ErrPolicies is wrapped by the error of a load whose policy files have errors; the
	// message holds the diagnostics, each at its file:line:col.
	ErrPolicies = errors.New("serve: the policies do not load")
	// ErrNoPolicies: the files load but declare no policy (an empty file, or one holding
	// only comments), which would allow every request.
	ErrNoPolicies = errors.New("serve: the policy files declare no policy")
	// ErrRemoval is wrapped by the error of a reload that would drop policies or rules
	// while Config.AllowRemoval is not set; the message names them.
	ErrRemoval = errors.New("serve: the reload would remove policies or rules")
	// ErrUnstable: the files read differently each time they were read (see Reload), as
	// when a write is in progress.
	ErrUnstable = errors.New("serve: the policy files kept changing while being read")
)

// Reading the files: they are read (and loaded) until two reads in a row hold the same
// bytes, at most maxReads times, readPause apart.
const (
	maxReads  = 5
	readPause = 50 * time.Millisecond
)

// New loads the policies and returns a Server deciding them. An error means nothing is
// served: the files do not load or do not compile (ErrPolicies), declare no policy
// (ErrNoPolicies), or kept changing while being read (ErrUnstable).
func New(c Config) (*Server, error) {
	if c.Backend == nil {
		return nil, errors.New("serve: no backend")
	}
	s := &Server{paths: c.Paths, backend: c.Backend, opts: c.Engine, log: c.Logger, reloaded: c.Reloaded, headers: c.Headers, shadowMode: c.ShadowMode,
		allowRemoval: c.AllowRemoval, admin: c.Admin, pause: c.pause}
	if s.pause == nil {
		s.pause = func() { time.Sleep(readPause) }
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.leases.now = c.Clock
	if s.leases.now == nil {
		s.leases.now = time.Now
	}
	s.reservations.now = s.leases.now
	switch c.Backend.(type) {
	case *engine.Local, *engine.Native:
	default:
		// One on_error = "local" fallback for every engine a reload makes, so the counters
		// it keeps during an outage survive a reload (each engine would start its own).
		hopts := []luahost.Option{luahost.WithClock(clockFunc(s.leases.now))}
		var nopts []native.Option
		if c.LocalMaxMemory > 0 {
			hopts = append(hopts, luahost.WithMaxMemory(c.LocalMaxMemory, luahost.AllKeysLRU))
			nopts = append(nopts, native.WithMaxMemory(c.LocalMaxMemory, luahost.AllKeysLRU))
		}
		fallback := engine.NewNative(luahost.New(hopts...), nopts...)
		s.opts = append([]engine.Option{engine.WithLocalFallback(fallback)}, s.opts...)
	}
	if c.XDS != nil {
		return s.startXDS(*c.XDS)
	}
	st, _, err := s.load(nil)
	if s.reloaded != nil {
		if err != nil {
			s.reloaded(false, 0, 0)
		} else {
			s.reloaded(true, len(st.plan.Policies()), countRules(st.cfg))
		}
	}
	if err != nil {
		return nil, err
	}
	s.cur.Store(st)
	s.log.Info("rlctl serve: policies loaded", "policies", len(st.plan.Policies()), "rules", countRules(st.cfg), "script", st.plan.Script().SHA1)
	return s, nil
}

// Engine returns the engine deciding requests now. A Reload replaces it; an engine
// already returned keeps deciding the policies it was made with.
func (s *Server) Engine() *engine.Engine { return s.cur.Load().engine }

// Reload reads the policy files again. When they load and compile, the new policies
// decide every request from then on; requests being decided finish on the old ones. The
// report lists, per rule, whether its counters carry over (see Changes). Files that read
// as they did change nothing: the running engine stays, and the report is empty.
//
// The files are read until two reads in a row hold the same bytes (each of them loaded, so
// what is checked is what is loaded), so a file caught half-written by an editor or a copy
// is not loaded; they are read at most five times, 50ms apart, before the reload is
// refused with ErrUnstable.
//
// A reload is refused, and the running policies stay, when the files do not load or
// compile (ErrPolicies), declare no policy at all (ErrNoPolicies, always), or drop a
// policy or a rule of a policy they keep while Config.AllowRemoval is not set
// (ErrRemoval, naming each). A refusal is logged at error level with its reason and how
// to allow it, and reported to the Reloaded hook as a failed reload.
func (s *Server) Reload() ([]Change, error) { return s.reloadFrom(nil) }

// leaseReturn bounds the time a reload or a shutdown spends giving quota leases back
// (engine.Engine.ReturnLeases): what it cannot return counts until its window ends.
const leaseReturn = 5 * time.Second

// ReturnLeases gives back the quota leases of the running engine (dsl.Rule.LeaseSize) and
// stops it taking new ones: call it when the service stops taking requests, so what its
// slices hold serves other instances at once. It returns the first refund's failure.
func (s *Server) ReturnLeases(ctx context.Context) error {
	return s.cur.Load().engine.ReturnLeases(ctx)
}

// reloadFrom is Reload, with xds, when not nil, as the management server's translated
// policies in place of the running ones (see sources).
func (s *Server) reloadFrom(xds []byte) ([]Change, error) {
	s.reload.Lock()
	defer s.reload.Unlock()
	old := s.cur.Load()
	st, changes, err := s.load(xds)
	if err != nil {
		s.log.Error("rlctl serve: reload refused; the running policies stay", "error", err.Error())
		if s.reloaded != nil {
			s.reloaded(false, len(old.plan.Policies()), countRules(old.cfg))
		}
		return nil, err
	}
	if sameFiles(old.cfg, st.cfg) {
		// A watched directory changed elsewhere, or a file was saved as it was: keep the
		// running engine (its breaker and deny cache) as it is.
		s.log.Debug("rlctl serve: policies unchanged")
		if s.reloaded != nil {
			s.reloaded(true, len(old.plan.Policies()), countRules(old.cfg))
		}
		return nil, nil
	}
	s.cur.Store(st)
	// The old engine's quota leases go back, for the new one (and other instances) to take.
	rctx, rcancel := context.WithTimeout(context.Background(), leaseReturn)
	if err := old.engine.ReturnLeases(rctx); err != nil {
		s.log.Warn("rlctl serve: quota leases not returned on reload; they count until their windows end", "error", err.Error())
	}
	rcancel()
	for _, c := range changes {
		level := slog.LevelInfo
		if c.Kind == Removed {
			// Allowed (AllowRemoval), but a limit is gone: say so louder than a change.
			level = slog.LevelWarn
		}
		s.log.Log(context.Background(), level, "rlctl serve: rule "+c.Kind.String(), "policy", c.Policy, "rule", c.Rule, "why", c.Why)
	}
	s.log.Info("rlctl serve: policies reloaded", "policies", len(st.plan.Policies()), "rules", countRules(st.cfg), "script", st.plan.Script().SHA1)
	if s.reloaded != nil {
		s.reloaded(true, len(st.plan.Policies()), countRules(st.cfg))
	}
	return changes, nil
}

// load reads, checks and compiles the policy files (with xds, see sources), and compares
// them with the running ones. It changes nothing.
func (s *Server) load(xds []byte) (*state, []Change, error) {
	cfg, diags := s.sources(xds)
	if cfg == nil {
		return nil, nil, fmt.Errorf("%w: %s read differently in each of %d reads %v apart; they are read again on their next change or SIGHUP",
			ErrUnstable, strings.Join(s.paths, ", "), maxReads, readPause)
	}
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("%w:\n%s", ErrPolicies, render(cfg.Files, diags))
	}
	if len(cfg.Policies) == 0 && s.xds == nil {
		hint := ""
		if s.cur.Load() != nil {
			hint = "; the running policies stay, and the files are read again on their next change or SIGHUP"
		}
		return nil, nil, fmt.Errorf("%w in %s: every request would be allowed. Declare at least one policy%s",
			ErrNoPolicies, strings.Join(s.paths, ", "), hint)
	}
	var changes []Change
	if old := s.cur.Load(); old != nil {
		changes = Changes(old.cfg, cfg)
		if err := s.removals(old.cfg, cfg, changes); err != nil {
			return nil, nil, err
		}
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrPolicies, err)
	}
	return &state{cfg: cfg, plan: plan, engine: engine.New(s.backend, plan, s.opts...), at: s.leases.now()}, changes, nil
}

// read loads the policy files until two loads in a row read the same bytes from the same
// files, and returns the last; nil when they never did within maxReads loads.
func (s *Server) read() (*dsl.Config, hcl.Diagnostics) {
	cfg, diags := dsl.Load(s.paths...)
	for range maxReads - 1 {
		s.pause()
		again, more := dsl.Load(s.paths...)
		if sameFiles(cfg, again) {
			return again, more
		}
		cfg, diags = again, more
	}
	return nil, diags
}

// removals is the error of a reload from old to cur, whose changes are given, when it
// drops policies or rules of kept policies and removals are not allowed; nil otherwise.
func (s *Server) removals(old, cur *dsl.Config, changes []Change) error {
	if s.allowRemoval {
		return nil
	}
	kept := map[string]bool{}
	for _, p := range cur.Policies {
		kept[p.Name] = true
	}
	fromXDS := xdsPolicies(old) // the management server's to remove (see XDS)
	var gone []string
	for _, p := range old.Policies {
		if !kept[p.Name] && !fromXDS[p.Name] {
			gone = append(gone, fmt.Sprintf("policy %q", p.Name))
		}
	}
	for _, c := range changes {
		if c.Kind == Removed && kept[c.Policy] && !fromXDS[c.Policy] {
			gone = append(gone, fmt.Sprintf("rule %q of policy %q", c.Rule, c.Policy))
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s would no longer be limited. If that is meant, run rlctl serve with -allow-removal "+
		"(serve.Config.AllowRemoval); if a file was cut short or emptied, restore it", ErrRemoval, strings.Join(gone, ", "))
}

// render writes diagnostics as rlctl validate does, without colour.
func render(files map[string]*hcl.File, diags hcl.Diagnostics) string {
	var b strings.Builder
	_ = cli.WriteDiagnostics(&b, files, diags, false)
	return b.String()
}

// sameFiles reports whether two loads read the same files with the same bytes.
func sameFiles(a, b *dsl.Config) bool {
	if len(a.Files) != len(b.Files) {
		return false
	}
	for name, f := range a.Files {
		g, ok := b.Files[name]
		if !ok || !bytes.Equal(f.Bytes, g.Bytes) {
			return false
		}
	}
	return true
}

// clockFunc is a luahost.Clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

func countRules(cfg *dsl.Config) int {
	n := 0
	for _, p := range cfg.Policies {
		n += len(p.Rules)
	}
	return n
}
