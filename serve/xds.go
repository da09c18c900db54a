package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/hashicorp/hcl/v2"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/envoyconf"
)

// XDS is a management server that a Server takes policies from (Config.XDS), as
// envoyproxy/ratelimit takes its configuration with CONFIG_TYPE=GRPC_XDS_SOTW: the
// RateLimitConfig resources (RateLimitConfigType) of the state-of-the-world protocol, on
// an aggregated (ADS) stream.
//
// Every response is the whole set of resources. It is read (envoyconf.FromProto, in the
// order of the resources' names), translated (envoyconf.Translate) and loaded with the
// policy files, if any, as a reload of the files is (Server.Reload): a set that does not
// translate or does not load keeps the running policies, is logged at error level,
// counted as a failed reload (Config.Reloaded), and is refused to the management server
// (a NACK: the request's error_detail says why, and its version stays the last one
// accepted). A set that loads is swapped in and acknowledged (ACK).
//
// An update may remove policies and rules that the management server gave before, with or
// without Config.AllowRemoval: its set is complete and atomic, never a file cut short, and
// removing a limit there is how it is meant to go. A set with no policy at all (no
// resource, or only unlimited ones) is accepted too: the management server limits nothing.
// An update never changes the policies of the files, nor a file reload the server's.
//
// New returns once the first set has loaded: until then nothing is served (as
// envoyproxy/ratelimit waits for its initial configuration). When the stream breaks, it
// is opened again after Backoff, with the version last accepted.
type XDS struct {
	// Conn is the connection to the management server (grpc.NewClient, with its
	// transport credentials).
	Conn grpc.ClientConnInterface
	// Node identifies this instance: the management server answers with the resources
	// of its ID (envoyproxy/ratelimit's CONFIG_GRPC_XDS_NODE_ID).
	Node *corev3.Node
	// MergeDomains merges resources of the same domain (envoyconf.Options).
	MergeDomains bool
	// Wait ends New's wait for the first configuration (nil: as long as it takes): New
	// then stops the client and fails.
	Wait context.Context
	// Backoff is the wait before the stream is opened again after failures attempts in a
	// row that ended without a response (failures ≥ 1). Default: from 0.5–1s, doubling, to
	// 15–30s at most (each wait drawn at random from its upper half).
	Backoff func(failures int) time.Duration
	// After waits d (default time.After): the backoff's clock.
	After func(d time.Duration) <-chan time.Time
}

// RateLimitConfigType is the type URL of the resources an XDS source asks for.
const RateLimitConfigType = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// xdsFile is the name the management server's translated policies load under: the name
// diagnostics show for them.
const xdsFile = "<xds>.hcl"

// The default backoff's bounds.
const (
	xdsBackoffFirst = time.Second
	xdsBackoffMax   = 30 * time.Second
)

// xdsBackoff is XDS's default Backoff.
func xdsBackoff(failures int) time.Duration {
	d := min(xdsBackoffFirst<<min(failures-1, 5), xdsBackoffMax)
	return d/2 + rand.N(d/2+1)
}

// xdsClient is the ADS stream's client. Its states: connecting (opening a stream),
// streaming (waiting for responses, answering each), pacing (before trying again a
// configuration it refused), backing off (after a stream ended), stopped (Close). Only its
// goroutine (run) reads and writes version, refused and repeats.
type xdsClient struct {
	XDS
	s       *Server
	version string        // the last version accepted; "" before any
	refused *string       // the last version refused, when the last answer was a NACK
	repeats int           // how many times in a row it came again
	loaded  chan struct{} // closed once a first configuration has loaded
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	once    sync.Once
}

// startXDS starts the client of x and waits for its first configuration to load (see XDS).
func (s *Server) startXDS(x XDS) (*Server, error) {
	if x.Conn == nil {
		return nil, errors.New("serve: XDS has no connection to a management server")
	}
	if x.Backoff == nil {
		x.Backoff = xdsBackoff
	}
	if x.After == nil {
		x.After = time.After
	}
	if x.Wait == nil {
		x.Wait = context.Background()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &xdsClient{XDS: x, s: s, loaded: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	s.xds = c
	if len(s.paths) > 0 {
		// The files are checked now, as without xDS, rather than refused with each
		// configuration.
		if _, _, err := s.load(nil); err != nil {
			cancel()
			return nil, err
		}
	}
	go c.run(ctx)
	s.log.Info("rlctl serve: waiting for the first configuration from the xDS server", "node", x.Node.GetId())
	select {
	case <-c.loaded:
		return s, nil
	case <-x.Wait.Done():
		c.stop()
		return nil, fmt.Errorf("serve: no configuration from the xDS server: %w", context.Cause(x.Wait))
	}
}

// Close stops taking configurations from the xDS server (Config.XDS) and returns once its
// client has stopped; the running policies stay. It does nothing for a Server without XDS.
func (s *Server) Close() error {
	if s.xds != nil {
		s.xds.stop()
	}
	return nil
}

func (c *xdsClient) stop() {
	c.cancel()
	<-c.done
}

// run connects, streams, and backs off when a stream ends, until ctx ends.
func (c *xdsClient) run(ctx context.Context) {
	defer close(c.done)
	failures := 0
	for {
		err := c.stream(ctx, func() { failures = 0 })
		if ctx.Err() != nil {
			return
		}
		failures++
		d := c.Backoff(failures)
		c.s.log.Warn("rlctl serve: the xDS stream ended; opening another", "error", err.Error(), "in", d.String(), "failures", failures)
		select {
		case <-ctx.Done():
			return
		case <-c.After(d):
		}
	}
}

// stream opens an ADS stream, asks for every RateLimitConfig (with the version last
// accepted) and answers each response, until the stream ends: its error. responded is
// called with each response.
func (c *xdsClient) stream(ctx context.Context, responded func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(c.Conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	c.s.log.Debug("rlctl serve: xDS stream open", "version", c.version)
	req := &discoveryv3.DiscoveryRequest{Node: c.Node, TypeUrl: RateLimitConfigType, VersionInfo: c.version}
	for {
		if err := st.Send(req); err != nil {
			if _, rerr := st.Recv(); rerr != nil {
				err = rerr // the stream's status, rather than Send's io.EOF
			}
			return err
		}
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		responded()
		if err := c.pace(ctx, resp); err != nil {
			return err
		}
		req = c.answer(resp)
	}
}

// pace waits, on the backoff, before a configuration that was refused is tried again:
// go-control-plane's cache, for one, sends it again at once after each NACK for as long as
// its snapshot stays, and the two would otherwise loop as fast as they can. A fix sent
// meanwhile arrives after the NACK (the server answers requests), at most one wait late.
func (c *xdsClient) pace(ctx context.Context, resp *discoveryv3.DiscoveryResponse) error {
	if c.refused == nil || *c.refused != resp.GetVersionInfo() {
		c.repeats = 0
		return nil
	}
	c.repeats++
	d := c.Backoff(c.repeats)
	c.s.log.Debug("rlctl serve: the xDS configuration refused comes again; trying it after a wait", "version", resp.GetVersionInfo(), "in", d.String(), "times", c.repeats)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.After(d):
		return nil
	}
}

// answer applies a response and returns its ACK, or its NACK with the reason.
func (c *xdsClient) answer(resp *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest {
	req := &discoveryv3.DiscoveryRequest{TypeUrl: RateLimitConfigType, ResponseNonce: resp.GetNonce()}
	if err := c.apply(resp); err != nil {
		req.VersionInfo = c.version
		req.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		v := resp.GetVersionInfo()
		c.refused = &v
		c.s.log.Info("rlctl serve: xDS configuration refused (NACK)", "version", resp.GetVersionInfo(), "resources", len(resp.GetResources()), "running", c.version)
		return req
	}
	c.version, c.refused = resp.GetVersionInfo(), nil
	req.VersionInfo = c.version
	c.s.log.Info("rlctl serve: xDS configuration accepted (ACK)", "version", c.version, "resources", len(resp.GetResources()))
	return req
}

// apply translates and loads a response's resources.
func (c *xdsClient) apply(resp *discoveryv3.DiscoveryResponse) error {
	src, err := c.translate(resp)
	if err != nil {
		err = fmt.Errorf("%w: the xDS configuration %q: %v", ErrPolicies, resp.GetVersionInfo(), err)
		c.s.refused(err)
		return err
	}
	if c.s.cur.Load() == nil {
		if err := c.s.loadFirst(src); err != nil {
			return err
		}
		c.once.Do(func() { close(c.loaded) })
		return nil
	}
	_, err = c.s.reloadFrom(src)
	return err
}

// translate is a response's resources as one policy file.
func (c *xdsClient) translate(resp *discoveryv3.DiscoveryResponse) ([]byte, error) {
	if t := resp.GetTypeUrl(); t != RateLimitConfigType {
		return nil, fmt.Errorf("the response is of type %s; only %s was asked for", t, RateLimitConfigType)
	}
	cfgs := make([]*envoyconf.Config, 0, len(resp.GetResources()))
	for i, a := range resp.GetResources() {
		if t := a.GetTypeUrl(); t != RateLimitConfigType {
			return nil, fmt.Errorf("resource %d is of type %s, not %s", i+1, t, RateLimitConfigType)
		}
		var rc ratelimitconfv3.RateLimitConfig
		if err := a.UnmarshalTo(&rc); err != nil {
			return nil, fmt.Errorf("resource %d: %v", i+1, err)
		}
		name := rc.GetName()
		if name == "" {
			name = fmt.Sprintf("resource %d", i+1)
		}
		cfgs = append(cfgs, envoyconf.FromProto(name, &rc))
	}
	// The management server's order is not the configuration's (go-control-plane's cache
	// sends a map's): names order the domains, and the wildcards of merged ones.
	slices.SortStableFunc(cfgs, func(a, b *envoyconf.Config) int { return cmp.Compare(a.Name, b.Name) })
	return envoyconf.Translate(cfgs, envoyconf.Options{MergeDomains: c.MergeDomains})
}

// loadFirst loads the first configuration from the xDS server, as New loads the files.
func (s *Server) loadFirst(xds []byte) error {
	s.reload.Lock()
	defer s.reload.Unlock()
	st, _, err := s.load(xds)
	if err != nil {
		s.log.Error("rlctl serve: the xDS configuration does not load; waiting for one that does", "error", err.Error())
		if s.reloaded != nil {
			s.reloaded(false, 0, 0)
		}
		return err
	}
	s.cur.Store(st)
	s.log.Info("rlctl serve: policies loaded", "policies", len(st.plan.Policies()), "rules", countRules(st.cfg), "script", st.plan.Script().SHA1)
	if s.reloaded != nil {
		s.reloaded(true, len(st.plan.Policies()), countRules(st.cfg))
	}
	return nil
}

// refused reports a configuration that did not translate, as Reload reports one that
// does not load.
func (s *Server) refused(err error) {
	s.reload.Lock()
	defer s.reload.Unlock()
	old := s.cur.Load()
	if old == nil {
		s.log.Error("rlctl serve: the xDS configuration does not load; waiting for one that does", "error", err.Error())
		if s.reloaded != nil {
			s.reloaded(false, 0, 0)
		}
		return
	}
	s.log.Error("rlctl serve: reload refused; the running policies stay", "error", err.Error())
	if s.reloaded != nil {
		s.reloaded(false, len(old.plan.Policies()), countRules(old.cfg))
	}
}

// sources loads what the server serves as one Config: the policy files and, with XDS,
// the management server's translated policies. A reload of the files (xds nil) loads them
// with the running translation; an update from the management server, its translation with
// the running files (as they were loaded, not read again): each source's change is loaded
// with the other as it runs, and refused for its own faults only.
func (s *Server) sources(xds []byte) (*dsl.Config, hcl.Diagnostics) {
	if s.xds == nil {
		return s.read()
	}
	running := s.cur.Load()
	var files *dsl.Config
	switch {
	case xds == nil && running == nil: // the files alone, checked at start
		return s.read()
	case xds == nil && len(s.paths) == 0: // SIGHUP with no files: nothing to read
		return running.cfg, nil
	case xds == nil:
		cfg, diags := s.read()
		if cfg == nil || diags.HasErrors() {
			return cfg, diags
		}
		files = cfg
		if f := running.cfg.Files[xdsFile]; f != nil {
			xds = f.Bytes
		}
	case running != nil:
		files = running.cfg
	case len(s.paths) > 0: // the first configuration
		cfg, diags := s.read()
		if cfg == nil || diags.HasErrors() {
			return cfg, diags
		}
		files = cfg
	}
	return withXDS(files, xds)
}

// withXDS loads the files of files (nil for none) and the translation xds as one Config.
func withXDS(files *dsl.Config, xds []byte) (*dsl.Config, hcl.Diagnostics) {
	srcs := map[string][]byte{}
	if xds != nil {
		srcs[xdsFile] = xds
	}
	if files != nil {
		plugin := map[string]bool{}
		for _, p := range files.Plugins {
			plugin[p.File] = true
		}
		for name, f := range files.Files {
			if name == xdsFile {
				continue
			}
			if !plugin[name] && !strings.HasSuffix(name, ".hcl") && !strings.HasSuffix(name, ".json") {
				// dsl.Parse tells policy files from plugin sources by their names.
				return &dsl.Config{Files: files.Files}, hcl.Diagnostics{{
					Severity: hcl.DiagError, Summary: "Policy file not named *.hcl",
					Detail:  "With an xDS server, the policy files are loaded with its configuration by their names: rename the file to end in .hcl or .hcl.json.",
					Subject: &hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos},
				}}
			}
			srcs[name] = f.Bytes
		}
	}
	return dsl.Parse(srcs)
}

// xdsPolicies are the names of cfg's policies that the management server gave.
func xdsPolicies(cfg *dsl.Config) map[string]bool {
	names := map[string]bool{}
	for _, p := range cfg.Policies {
		if p.DeclRange.Filename == xdsFile {
			names[p.Name] = true
		}
	}
	return names
}
