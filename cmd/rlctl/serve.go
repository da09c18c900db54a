package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/listen"
	"github.com/rlctl/rlctl/luahost"
	"github.com/rlctl/rlctl/metrics"
	"github.com/rlctl/rlctl/native"
	"github.com/rlctl/rlctl/serve"
)

var cmdServe = &command{
	name:  "serve",
	args:  "[-grpc ADDR] [-http ADDR] [-admin ADDR] [-tls-cert FILE -tls-key FILE [-tls-client-ca FILE]] [-auth-tokens FILE] [-max-conns N] [-redis URL [-redis-type TYPE] [-redis-batch N]] [-redis-tls-ca FILE] [-redis-tls-cert FILE -redis-tls-key FILE] [-timeout D] [-max-memory SIZE] [-drain D] [-watch=false] [-allow-removal] [-headers MODE [-legacy-header-names NAMES]] [-no-headers] [-shadow-mode] [-near-limit-ratio F] [-xds HOST:PORT [-xds-node ID] [-xds-tls-ca FILE] [-xds-tls-cert FILE -xds-tls-key FILE] [-merge-domains]] [-log-level LEVEL] [FILE|DIR...]",
	short: "run the policies as a rate limit service: Envoy's gRPC protocol, an HTTP API, metrics",
	long: `Serve decides requests for other processes with the policies of the files:

  gRPC (-grpc, default :8081)  Envoy's rate limit service, envoy.service.ratelimit.v3
                               RateLimitService/ShouldRateLimit, and grpc.health.v1
                               (services "" and "ratelimit")
  HTTP (-http, default :8080)  POST /v1/decide, /v1/peek, /v1/release (JSON; GET
                               /openapi.json describes them); envoyproxy/ratelimit's
                               POST /json and GET /healthcheck
  admin (-admin, default       GET /metrics (Prometheus: rlctl's families and
         127.0.0.1:6070)       envoyproxy/ratelimit's per-limit statistics), GET
                               /healthz (503 once draining): never expose it

With -redis the engine runs on that Redis (every instance of the service sharing it);
without, on the embedded backend: the state is in this process, and one instance is the
whole service. The policies' on_error modes decide when Redis fails.

The files are watched (and SIGHUP reloads them): a change that loads is swapped in
atomically and requests being decided finish on the old policies; a change that does not
load keeps the running policies, logs its diagnostics at file:line:col, and counts a
failed reload in rlctl_config_reloads_total. A rule's counters carry over a reload when
its policy and rule names, algorithm, key and shard stay the same; a rule whose
algorithm changes starts afresh. Each reload logs, per rule, kept, reset, added or
removed.

The gRPC and HTTP listeners take anyone who reaches them: a caller can peek at and
drain any counter. -auth-tokens, -tls-client-ca, or both, say who may call; each
listener warns at start when it listens beyond loopback with neither. Every connection
is held to timeouts (HTTP: 5s for the headers, 10s to read a request, 10s to write the
answer, 60s idle; gRPC: 5s for the handshake, 60s idle, pings every 30s) and each
listener to -max-conns open connections: one past them is closed at once and counted in
rlctl_connections_refused_total. docs/serve.md's "Security" is the threat model.

SIGTERM or SIGINT stops the service: health turns NOT_SERVING (grpc.health.v1 Watch
streams are told so and end), new calls are refused, calls in flight finish (for at
most -drain), what the engine holds of quota leases goes back to Redis, then it exits 0. SIGHUP also reads the TLS and token files again.

Logs are JSON lines on stderr (log/slog). Every flag can also be set by an environment
variable, the flag's name in capitals with RLCTL_ before it and - as _ (RLCTL_GRPC,
RLCTL_REDIS, RLCTL_REDIS_TYPE, ...); a flag on the command line wins.

Flags:
  -grpc ADDR        gRPC listen address (default :8081; "" for none)
  -http ADDR        HTTP listen address (default :8080; "" for none)
  -admin ADDR       the admin listener, /metrics and /healthz (default 127.0.0.1:6070;
                    "" for none)
  -tls-cert FILE, -tls-key FILE
                    TLS, with this PEM certificate chain and key, on the gRPC and HTTP
                    listeners (not on admin); read again when the files change (a pair
                    that does not load keeps the running one, logged)
  -tls-client-ca FILE
                    require a client certificate that these PEM CAs sign, on the gRPC
                    and HTTP listeners (needs -tls-cert; read once, at start)
  -auth-tokens FILE bearer tokens, one a line (# comments and blank lines ignored);
                    every gRPC call but grpc.health.v1's needs "authorization: Bearer
                    TOKEN" metadata (Unauthenticated without), every HTTP API request
                    an Authorization: Bearer TOKEN header (401 without); a line "admin
                    TOKEN" also gives the admin right, which POST /v1/reset needs (403
                    without; without -auth-tokens nobody has it); read again when
                    the file changes (one that holds no token keeps the running ones)
  -max-conns N      open connections per listener, gRPC and HTTP each (default: (the
                    open-file limit - 272) / 2, 376 at a limit of 1024, at least 64)
  -redis URL        redis://[user:password@]host:port[/db] or rediss://... (TLS); for a
                    cluster or Sentinel, the first address, further ones as &addr=host:port
  -redis-type TYPE  single (default), cluster or sentinel (the URL then needs
                    ?master_name=NAME), as envoyproxy/ratelimit's REDIS_TYPE
  -redis-batch N    the most decisions one script call carries (default 64; 1: each
                    alone): decisions that arrive while a call is in flight go together
                    in the next, each charged on its own; a lone one waits for nothing.
                    On a cluster, per hash slot. As envoyproxy/ratelimit's
                    REDIS_PIPELINE_LIMIT
  -redis-tls-ca FILE
                    the CAs (PEM) that sign the Redis server's certificate (default:
                    the system's); needs a rediss:// URL
  -redis-tls-cert FILE, -redis-tls-key FILE
                    a client certificate and its key for a server that requires one
                    (tls-auth-clients yes); read again when the files change
  -timeout D        the decision deadline on Redis (default 50ms): past it the policy's
                    on_error decides
  -max-memory SIZE  the memory for counters kept in process, as policies write sizes
                    ("64MiB", "1GB"; default 256MiB; 0 for no cap): the embedded
                    backend's or, with -redis, the on_error = "local" fallback's during
                    an outage; past it the least recently used keys are evicted (each a
                    client whose history is forgotten), counted in
                    rlctl_evicted_keys_total
  -drain D          how long in-flight calls may take to finish at shutdown (default 10s)
  -watch            reload when the files change (default true)
  -allow-removal    let a reload remove a policy or a rule (without it such a reload is
                    refused and logged, and the running policies stay)
  -headers MODE     the fields Envoy responses carry for the client: draft (default:
                    RateLimit-Policy, RateLimit, Retry-After), legacy (envoyproxy/ratelimit's
                    RateLimit-Limit, -Remaining, -Reset) or none; -no-headers is none
  -legacy-header-names LIMIT,REMAINING,RESET
                    the legacy fields' names (default RateLimit-Limit,RateLimit-Remaining,
                    RateLimit-Reset)
  -shadow-mode      answer OK every Envoy request that would be over the limit (the
                    statuses still say which descriptors are): count, never enforce
  -near-limit-ratio F
                    the fraction of a limit past which hits count as near_limit in the
                    envoyproxy/ratelimit statistics on /metrics (default 0.8)
  -xds HOST:PORT    take envoyproxy/ratelimit configurations (RateLimitConfig) from this
                    xDS management server, as its CONFIG_TYPE=GRPC_XDS_SOTW does: each
                    update is translated as rlctl import does and loaded with the files
                    (which may then be none); one that does not load is refused (NACK)
                    and the running policies stay. Serving starts once a first one loads
  -xds-node ID      the node id the management server answers (default "default")
  -xds-tls-ca FILE  TLS to the management server, trusting these PEM CAs
  -xds-tls-cert FILE, -xds-tls-key FILE
                    a client certificate and its key for the management server
  -merge-domains    merge the xDS resources of one domain, as MERGE_DOMAIN_CONFIG does
  -log-level LEVEL  debug, info (default), warn or error

Exit status: 0 stopped by a signal, 1 policies that do not load or a listener that
cannot start, 2 usage error.
`,
	run: runServe,
}

// serveReady, when set (by a test), is called with the listeners' addresses once serving.
var serveReady func(grpcAddr, httpAddr string)

// serveStop, when set (by a test), stops the service as SIGTERM does when it is closed.
var serveStop chan struct{}

// serveReloaded and serveDraining, when set (by a test), are told of every reload attempt
// and of the start of the drain.
var (
	serveReloaded func(ok bool)
	serveDraining func()
)

// serveAdminReady, when set (by a test), is called with the admin listener's address
// ("" for none) just before serveReady.
var serveAdminReady func(adminAddr string)

// serveGRPCOptions are added to the gRPC server's options (by a test, to watch calls).
var serveGRPCOptions []grpc.ServerOption

// defaultMaxMemory is -max-memory's default: the counters the embedded backend (or the
// on_error = "local" fallback) keeps in process, past which the least recently used keys
// are evicted. Measured: a gcra rule's key counts 168 bytes, so about 1.6 million keys;
// the process's resident memory reaches up to about twice the cap (luahost.WithMaxMemory).
const defaultMaxMemory = 256 << 20

func runServe(e *env, args []string) error {
	fs := flags("serve")
	grpcAddr := fs.String("grpc", ":8081", "")
	httpAddr := fs.String("http", ":8080", "")
	adminAddr := fs.String("admin", "127.0.0.1:6070", "")
	tlsCert := fs.String("tls-cert", "", "")
	tlsKey := fs.String("tls-key", "", "")
	tlsClientCA := fs.String("tls-client-ca", "", "")
	authTokens := fs.String("auth-tokens", "", "")
	maxConns := fs.Int("max-conns", defaultMaxConns(), "")
	redisURL := fs.String("redis", "", "")
	redisType := fs.String("redis-type", "single", "")
	redisBatch := fs.Int("redis-batch", engine.DefaultBatch, "")
	timeout := fs.Duration("timeout", 50*time.Millisecond, "")
	maxMemory := sizeFlag(defaultMaxMemory)
	fs.Var(&maxMemory, "max-memory", "")
	var rc redisConfig
	fs.StringVar(&rc.tlsCert, "redis-tls-cert", "", "")
	fs.StringVar(&rc.tlsKey, "redis-tls-key", "", "")
	fs.StringVar(&rc.tlsCA, "redis-tls-ca", "", "")
	drain := fs.Duration("drain", 10*time.Second, "")
	watch := fs.Bool("watch", true, "")
	allowRemoval := fs.Bool("allow-removal", false, "")
	noHeaders := fs.Bool("no-headers", false, "")
	headerMode := fs.String("headers", "draft", "")
	legacyNames := fs.String("legacy-header-names", "RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset", "")
	shadowMode := fs.Bool("shadow-mode", false, "")
	nearLimitRatio := fs.Float64("near-limit-ratio", 0.8, "")
	var xc xdsConfig
	fs.StringVar(&xc.addr, "xds", "", "")
	fs.StringVar(&xc.node, "xds-node", "default", "")
	fs.StringVar(&xc.tlsCA, "xds-tls-ca", "", "")
	fs.StringVar(&xc.tlsCert, "xds-tls-cert", "", "")
	fs.StringVar(&xc.tlsKey, "xds-tls-key", "", "")
	fs.BoolVar(&xc.mergeDomains, "merge-domains", false, "")
	level := fs.String("log-level", "info", "")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if err := fromEnv(fs); err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
		return errUsage
	}
	if fs.NArg() == 0 && xc.addr == "" {
		fmt.Fprintln(e.stderr, "rlctl: error: serve needs policy files or directories, or -xds")
		return errUsage
	}
	if !(*nearLimitRatio >= 0 && *nearLimitRatio <= 1) {
		fmt.Fprintf(e.stderr, "rlctl: error: -near-limit-ratio %v: it is a fraction of each limit, from 0 to 1\n", *nearLimitRatio)
		return errUsage
	}
	headers, err := headersFlag(*headerMode, *legacyNames, *noHeaders)
	if err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
		return errUsage
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: -log-level %q: use debug, info, warn or error\n", *level)
		return errUsage
	}
	if *timeout < 0 || *drain < 0 {
		fmt.Fprintln(e.stderr, "rlctl: error: -timeout and -drain cannot be negative")
		return errUsage
	}
	if *maxConns < 1 {
		fmt.Fprintln(e.stderr, "rlctl: error: -max-conns must be at least 1")
		return errUsage
	}
	sec, err := loadSecurity(*tlsCert, *tlsKey, *tlsClientCA, *authTokens)
	if misuse := flagMisuse(""); errors.As(err, &misuse) {
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
		return errUsage
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
		return errFailed
	}
	log := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: lvl}))

	m := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []engine.Option{engine.WithHooks(m.Hooks()), engine.WithLogger(log), engine.WithTimeout(*timeout)}

	var backend engine.Backend
	if *redisURL == "" {
		if *redisType != "single" {
			fmt.Fprintln(e.stderr, "rlctl: error: -redis-type without -redis")
			return errUsage
		}
		var hopts []luahost.Option
		var nopts []native.Option
		if maxMemory > 0 {
			hopts = append(hopts, luahost.WithMaxMemory(int64(maxMemory), luahost.AllKeysLRU))
			nopts = append(nopts, native.WithMaxMemory(int64(maxMemory), luahost.AllKeysLRU))
		}
		if rc != (redisConfig{}) {
			fmt.Fprintln(e.stderr, "rlctl: error: -redis-tls-cert, -redis-tls-key and -redis-tls-ca without -redis")
			return errUsage
		}
		backend = engine.NewNative(luahost.New(hopts...), nopts...)
		log.Info("rlctl serve: embedded backend: the counters live in this process", "max_memory", int64(maxMemory))
	} else {
		rc.url, rc.typ = *redisURL, *redisType
		c, err := rc.client(log)
		if err != nil {
			fmt.Fprintf(e.stderr, "rlctl: error: -redis: %v\n", err)
			return errUsage
		}
		defer c.Close()
		go probeRedis(c, log)
		if *redisBatch < 1 {
			fmt.Fprintf(e.stderr, "rlctl: error: -redis-batch %d: want 1 (each call alone) or more\n", *redisBatch)
			return errUsage
		}
		r := engine.NewRedis(c, engine.Batched(*redisBatch))
		m.WatchRedis(r)
		backend = r
		log.Info("rlctl serve: Redis backend", "type", *redisType)
	}

	// SIGTERM and SIGINT also end the wait for a first configuration from -xds.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGHUP, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sig)
	wait, stopWaiting := context.WithCancel(context.Background())
	waited := make(chan struct{})
	defer func() { stopWaiting(); <-waited }()
	stop := serveStop
	var stopped os.Signal // a SIGTERM or SIGINT taken while waiting; read after waited
	go func() {
		defer close(waited)
		for {
			select {
			case s := <-sig:
				if s == syscall.SIGHUP {
					continue // the policies are being loaded: nothing to reload yet
				}
				stopped = s
				stopWaiting()
			case <-stop:
				stopWaiting()
			case <-wait.Done():
			}
			return
		}
	}()
	xds, xconn, err := xc.source(wait, log)
	if err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
		if errors.As(err, new(flagMisuse)) {
			return errUsage
		}
		return errFailed
	}
	if xconn != nil {
		defer xconn.Close()
	}
	reloaded := serveReloaded // this run's: a test's next run sets its own
	srv, err := serve.New(serve.Config{
		XDS:   xds,
		Paths: fs.Args(), Backend: backend, Engine: opts, Logger: log,
		Reloaded: func(ok bool, policies, rules int) {
			m.ConfigReload(ok)
			if ok {
				m.Plan(policies, rules)
			}
			if reloaded != nil {
				reloaded(ok)
			}
		},
		Headers:        headers,
		ShadowMode:     *shadowMode,
		LocalMaxMemory: int64(maxMemory),
		AllowRemoval:   *allowRemoval,
		Admin:          sec.admin,
	})
	stopWaiting()
	<-waited
	if stopped != nil && err == nil {
		select { // it came as the configuration loaded: stop once serving
		case sig <- stopped:
		default: // another is pending already
		}
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
		return errFailed
	}
	defer srv.Close()
	stats, err := serve.NewEnvoyStats(srv, *nearLimitRatio)
	if err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
		return errFailed
	}
	reg.MustRegister(stats)
	reg.MustRegister(srv.RLQSStats())

	if *grpcAddr == "" && *httpAddr == "" {
		fmt.Fprintln(e.stderr, "rlctl: error: -grpc and -http are both empty: nothing to serve")
		return errUsage
	}
	refused := refusedConns()
	reg.MustRegister(refused)
	var ls [3]net.Listener // gRPC, HTTP API, admin
	for i, l := range []struct {
		flag, addr string
		max        int
	}{{"grpc", *grpcAddr, *maxConns}, {"http", *httpAddr, *maxConns}, {"admin", *adminAddr, adminMaxConns}} {
		if ls[i], err = listenCapped(l.flag, l.addr, l.max, refused); err != nil {
			for _, o := range ls[:i] {
				if o != nil {
					o.Close()
				}
			}
			fmt.Fprintf(e.stderr, "rlctl: error: -%s: %v\n", l.flag, err)
			return errFailed
		}
	}
	gl, hl, al := ls[0], ls[1], ls[2]
	sec.warnExposed(log, "gRPC", gl)
	sec.warnExposed(log, "HTTP", hl)
	if al != nil && !isLoopback(al.Addr()) {
		log.Warn("rlctl serve: the admin listener (/metrics, /healthz) listens beyond loopback, with no authentication", "addr", al.Addr().String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs := listen.NewHealth()
	hs.SetServingStatus("ratelimit", healthpb.HealthCheckResponse_SERVING) // envoyproxy/ratelimit's service name
	gs := grpc.NewServer(append(sec.grpcOptions(), serveGRPCOptions...)...)
	srv.RegisterGRPC(gs)
	hs.Register(gs)
	var draining atomic.Bool
	hsrv := sec.apiServer(srv.Handler(), &draining)
	asrv := adminServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), &draining)
	errs := make(chan error, 3)
	var gaddr, haddr, aaddr string
	if gl != nil {
		gaddr = gl.Addr().String()
		go func() { errs <- gs.Serve(gl) }()
	}
	if hl != nil {
		haddr = hl.Addr().String()
		go func() {
			if sec.tls != nil {
				errs <- hsrv.ServeTLS(hl, "", "")
			} else {
				errs <- hsrv.Serve(hl)
			}
		}()
	}
	if al != nil {
		aaddr = al.Addr().String()
		go func() { errs <- asrv.Serve(al) }()
	}
	var watched <-chan struct{} // closed when the policy watcher has stopped
	if *watch {
		if watched, err = srv.Watch(ctx); err != nil {
			log.Error("rlctl serve: the policy files cannot be watched; SIGHUP still reloads them", "error", err.Error())
		}
		sec.watchSecrets(ctx, log)
	}
	log.Info("rlctl serve: serving", "grpc", gaddr, "http", haddr, "admin", aaddr, "tls", sec.tls != nil, "tokens", sec.tokens != nil)
	if serveAdminReady != nil {
		serveAdminReady(aaddr)
	}
	if serveReady != nil {
		serveReady(gaddr, haddr)
	}

	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				_, _ = srv.Reload()
				sec.reload(log)
				continue
			}
		case <-stop:
		case err := <-errs:
			log.Error("rlctl serve: a listener failed", "error", err.Error())
			gs.Stop()
			_ = hsrv.Close()
			_ = asrv.Close()
			return errFailed
		}
		break
	}
	log.Info("rlctl serve: draining", "for", drain.String())
	draining.Store(true)
	hs.Drain() // NOT_SERVING, and Watch streams end: they would hold GracefulStop
	if serveDraining != nil {
		serveDraining()
	}
	cancel()
	if watched != nil {
		<-watched // no reload runs once serve has returned
	}
	dctx, dcancel := context.WithTimeout(context.Background(), *drain)
	defer dcancel()
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	herr := hsrv.Shutdown(dctx)
	select {
	case <-done:
	case <-dctx.Done():
		gs.Stop()
	}
	if herr != nil && !errors.Is(herr, context.DeadlineExceeded) {
		log.Warn("rlctl serve: HTTP shutdown", "error", herr.Error())
	}
	_ = asrv.Close()
	// What the engine holds of quota leases goes back for the other instances.
	rctx, rcancel := context.WithTimeout(context.Background(), *drain)
	if err := srv.ReturnLeases(rctx); err != nil {
		log.Warn("rlctl serve: quota leases not returned; they count until their windows end", "error", err.Error())
	}
	rcancel()
	log.Info("rlctl serve: stopped")
	return nil
}

// fromEnv sets every flag not given on the command line from RLCTL_<NAME>, when set.
func fromEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := "RLCTL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(env)
		if !ok || given[f.Name] || err != nil {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%s: %v", env, strconv.Quote(v), e)
		}
	})
	return err
}
