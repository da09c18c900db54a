package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/rlctl/rlctl/internal/listen"
	"github.com/rlctl/rlctl/serve"
)

// serveLimits are the timeouts and sizes of every listener (a test makes them short).
var serveLimits = listen.Defaults

// adminMaxConns caps the admin listener's connections: a scraper and a few probes.
const adminMaxConns = 16

// fdReserve is the open files -max-conns's default leaves to all but the listeners'
// connections: Redis pools (one per cluster node), the policy and secret files, the
// watchers, the admin listener's adminMaxConns.
const fdReserve = 256 + adminMaxConns

// defaultMaxConns is -max-conns's default: the gRPC and HTTP listeners together stay
// within the open-file limit (RLIMIT_NOFILE, which Go raises to its hard limit at start)
// less fdReserve, so a flood of connections cannot take the files Redis and new clients
// need: (limit − 272) / 2, 376 at the usual 1024, at least 64 and at most about a
// million (64 when the limit cannot be read).
func defaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 64
	}
	return max(64, (int(min(rl.Cur, 1<<21))-fdReserve)/2)
}

// security is what guards the gRPC and HTTP API listeners: TLS (with client
// certificates, when it has client CAs) and bearer tokens, each nil when not asked for.
type security struct {
	tls    *listen.TLS
	tokens *listen.Tokens
}

// admin reports whether an HTTP request carries a token of the admin right.
func (s security) admin(r *http.Request) bool {
	return s.tokens != nil && s.tokens.Admin(r.Header.Get("Authorization"))
}

// flagMisuse is an error of flags that do not go together (exit 2), not of files that
// do not load (exit 1).
type flagMisuse string

func (e flagMisuse) Error() string { return string(e) }

// loadSecurity reads the files of -tls-cert, -tls-key, -tls-client-ca and -auth-tokens.
func loadSecurity(cert, key, clientCA, tokens string) (security, error) {
	var s security
	switch {
	case (cert == "") != (key == ""):
		return s, flagMisuse("-tls-cert and -tls-key go together")
	case clientCA != "" && cert == "":
		return s, flagMisuse("-tls-client-ca needs -tls-cert and -tls-key (client certificates are a TLS feature)")
	}
	var err error
	if cert != "" {
		if s.tls, err = listen.LoadTLS(cert, key, clientCA); err != nil {
			return s, fmt.Errorf("-tls-cert: %w", err)
		}
	}
	if tokens != "" {
		if s.tokens, err = listen.LoadTokens(tokens); err != nil {
			return s, fmt.Errorf("-auth-tokens: %w", err)
		}
	}
	return s, nil
}

// files are the files to watch for reloads.
func (s security) files() []string {
	var f []string
	if s.tls != nil {
		f = append(f, s.tls.Files()...)
	}
	if s.tokens != nil {
		f = append(f, s.tokens.Files()...)
	}
	return f
}

// reload re-reads the files; one that does not load keeps what was loaded last, logged.
func (s security) reload(log *slog.Logger) {
	if s.tls != nil {
		if err := s.tls.Reload(); err != nil {
			log.Error("rlctl serve: the TLS certificate does not reload; the running one stays", "error", err.Error())
		} else {
			log.Info("rlctl serve: TLS certificate read")
		}
	}
	if s.tokens != nil {
		if err := s.tokens.Reload(); err != nil {
			log.Error("rlctl serve: the tokens do not reload; the running ones stay", "error", err.Error())
		} else {
			log.Info("rlctl serve: tokens read")
		}
	}
	if serveSecretsReloaded != nil {
		serveSecretsReloaded()
	}
}

// serveSecretsReloaded, when set (by a test), is called after every reload of the TLS
// and token files that a change of them set off.
var serveSecretsReloaded func()

// grpcOptions are the gRPC server's options: the engine's message bounds, the listener
// limits, TLS and tokens (every method but grpc.health.v1's, which Envoy and Kubernetes
// probe with neither).
func (s security) grpcOptions() []grpc.ServerOption {
	// A pool of stream workers runs calls on goroutines whose stacks have grown already
	// (grpc-go otherwise starts one per call): 1.07-1.21× the decisions/s in
	// BenchmarkServeStreamWorkers (BENCHMARKS.md).
	o := []grpc.ServerOption{grpc.NumStreamWorkers(32)}
	o = append(o, serve.GRPCServerOptions()...)
	o = append(o, listen.GRPCOptions(serveLimits)...)
	if s.tls != nil {
		o = append(o, grpc.Creds(credentials.NewTLS(s.tls.Config())))
	}
	if s.tokens != nil {
		o = append(o, s.tokens.GRPCOptions(func(method string) bool { return strings.HasPrefix(method, "/grpc.health.v1.Health/") })...)
	}
	return o
}

// apiServer is the HTTP API's server: h's /v1/*, /json and /openapi.json, behind the
// tokens, and GET /healthcheck (as envoyproxy/ratelimit's: "OK", 500 once draining) for
// anyone, as gRPC's health service.
func (s security) apiServer(h http.Handler, draining *atomic.Bool) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/v1/", h)
	mux.Handle("/json", h)
	mux.Handle("GET /openapi.json", h)
	var api http.Handler = mux
	if s.tokens != nil {
		api = s.tokens.Handler(mux)
	}
	outer := http.NewServeMux()
	outer.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if draining.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("OK"))
	})
	outer.Handle("/", api)
	api = outer
	hs := listen.HTTPServer(api, serveLimits)
	if s.tls != nil {
		hs.TLSConfig = s.tls.Config()
	}
	return hs
}

// adminServer serves GET /metrics of reg and GET /healthz: 200 until the drain starts,
// 503 from then on.
func adminServer(metrics http.Handler, draining *atomic.Bool) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "stopping")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return listen.HTTPServer(mux, serveLimits)
}

// listenCapped listens on addr ("" for no listener), holding at most n connections open;
// a connection past them is closed at once and counted in refused{listener=name}.
func listenCapped(name, addr string, n int, refused *prometheus.CounterVec) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := refused.WithLabelValues(name)
	return listen.Limit(l, n, c.Inc), nil
}

// refusedConns counts the connections a listener closed at once, past its cap.
func refusedConns() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlctl_connections_refused_total",
		Help: "Connections closed as soon as accepted, the listener holding its -max-conns already.",
	}, []string{"listener"})
}

// warnExposed logs, for a listener bound beyond loopback, what anyone who reaches it
// can do: with no authentication, drain any counter; with tokens and no TLS, read them.
func (s security) warnExposed(log *slog.Logger, name string, l net.Listener) {
	if l == nil || isLoopback(l.Addr()) {
		return
	}
	switch {
	case s.tokens == nil && (s.tls == nil || !s.tls.ClientAuth()):
		log.Warn("rlctl serve: "+name+" listens beyond loopback with no authentication: anyone who reaches it can peek at and drain any counter (-auth-tokens, -tls-client-ca; docs/serve.md, Security)", "addr", l.Addr().String())
	case s.tls == nil:
		log.Warn("rlctl serve: "+name+" takes bearer tokens in clear text beyond loopback: anyone on the path can read and replay them (-tls-cert, -tls-key)", "addr", l.Addr().String())
	}
}

// isLoopback reports whether a is a loopback address only.
func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// watchSecrets reloads the TLS and token files when they change, until ctx ends.
func (s security) watchSecrets(ctx context.Context, log *slog.Logger) {
	files := s.files()
	if len(files) == 0 {
		return
	}
	_, err := listen.Watch(ctx, files, func() { s.reload(log) }, func(err error) {
		log.Warn("rlctl serve: watching the TLS and token files", "error", err.Error())
	})
	if err != nil {
		log.Error("rlctl serve: the TLS and token files cannot be watched; restart to change them", "error", err.Error())
	}
}

// headersFlag reads -headers, -legacy-header-names and -no-headers.
func headersFlag(mode, names string, none bool) (serve.Headers, error) {
	if none {
		mode = "none"
	}
	switch mode {
	case "draft":
		return serve.Headers{}, nil
	case "none":
		return serve.Headers{Omit: true}, nil
	case "legacy":
		n := strings.Split(names, ",")
		if len(n) != 3 || slices.Contains(n, "") {
			return serve.Headers{}, fmt.Errorf("-legacy-header-names %q: give three names, LIMIT,REMAINING,RESET", names)
		}
		return serve.Headers{Legacy: &serve.LegacyHeaders{Limit: n[0], Remaining: n[1], Reset: n[2]}}, nil
	}
	return serve.Headers{}, fmt.Errorf("-headers %q: use draft, legacy or none", mode)
}
