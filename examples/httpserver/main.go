// Command httpserver is a small API server rate-limited by rlctl: it loads a policy file,
// decides every request with the engine (embedded on luahost, or on Redis with -redis)
// and answers with the IETF RateLimit fields.
//
//	go run ./examples/httpserver -policy policies/public_api.hcl
//	curl -i http://127.0.0.1:8080/v1/items
//	curl -i -H 'Authorization: Bearer demo-pro' http://127.0.0.1:8080/v1/items
//
// With -policy policies/uploads.hcl, POST /upload reads the whole body before it answers,
// so a signed-in user's uploads hold a concurrency lease while they last.
//
// Callers are anonymous (limited per address) or present one of the demo API keys
// below, which stand in for a real authentication middleware.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
	"github.com/rlctl/rlctl/luahost"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "httpserver: error: %v\n", err)
		os.Exit(1)
	}
}

type usageError struct{ error }

// server is what the flags configure.
type server struct {
	addr    string
	handler http.Handler
	close   func()
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	s, err := setup(args, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "httpserver: listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// setup parses the flags, loads the policy and builds the engine and the handler.
func setup(args []string, stderr io.Writer) (*server, error) {
	fs := flag.NewFlagSet("httpserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policy := fs.String("policy", "policies/public_api.hcl", "policy `file` or directory")
	addr := fs.String("addr", "127.0.0.1:8080", "listen `address`")
	redisURL := fs.String("redis", "", "Redis `URL` (redis://host:6379/0); empty: decide in process on luahost")
	proxies := fs.String("trusted-proxies", "", "comma-separated `CIDRs` of proxies whose X-Forwarded-For is believed")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "httpserver: unexpected argument %q\n", fs.Arg(0))
		return nil, usageError{errors.New("unexpected arguments")}
	}
	var trusted []netip.Prefix
	for c := range strings.SplitSeq(*proxies, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("-trusted-proxies: %v", err)
		}
		trusted = append(trusted, p)
	}

	cfg, diags := dsl.Load(*policy)
	if len(diags) > 0 {
		files := map[string]*hcl.File(nil)
		if cfg != nil {
			files = cfg.Files
		}
		_ = dsl.WriteDiagnostics(stderr, files, diags, 100, false)
	}
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s does not load", *policy)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		return nil, err
	}

	var backend engine.Backend
	closeFn := func() {}
	if *redisURL != "" {
		opt, err := redis.ParseURL(*redisURL)
		if err != nil {
			return nil, fmt.Errorf("-redis: %v", err)
		}
		// The engine's deadline ends calls; a retried call could be charged twice.
		opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1
		rdb := redis.NewClient(opt)
		closeFn = func() { _ = rdb.Close() }
		backend = engine.NewRedis(rdb)
	} else {
		backend = engine.NewNative(luahost.New())
	}
	e := engine.New(backend, plan)
	return &server{addr: *addr, handler: newHandler(e, trusted), close: closeFn}, nil
}

// identity is an authenticated caller: what the demo keys map to. It implements
// dsl.Request, so the middleware reads user, tenant and plan from it without a map.
type identity struct{ user, tenant, plan string }

func (id *identity) Attr(name string) string {
	switch name {
	case "user":
		return id.user
	case "tenant":
		return id.tenant
	case "plan":
		return id.plan
	}
	return ""
}

// demoKeys stand in for a real credential store.
var demoKeys = map[string]*identity{
	"demo-free": {user: "alice", tenant: "acme", plan: "free"},
	"demo-pro":  {user: "bob", tenant: "globex", plan: "pro"},
}

type identityKey struct{}

// authenticate puts the caller's identity in the request context: the job of a real
// authentication middleware. An unknown key is refused; no key is anonymous.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.Header.Get("Authorization"); h != "" {
			id, ok := demoKeys[strings.TrimPrefix(h, "Bearer ")]
			if !ok {
				w.Header().Set("WWW-Authenticate", "Bearer")
				http.Error(w, "unknown API key", http.StatusUnauthorized)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
		}
		next.ServeHTTP(w, r)
	})
}

// newHandler is the application: authentication, then the rate limiter, then the API.
func newHandler(e *engine.Engine, trusted []netip.Prefix) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/items", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"items":["apple","pear"]}`+"\n")
	})
	// An upload reads its whole body before answering, so a concurrency lease
	// (policies/uploads.hcl) is held for as long as the upload lasts.
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, fmt.Sprintf("upload failed after %d bytes: %v", n, err), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "received %d bytes\n", n)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s: ok\n", r.Method, r.URL.Path)
	})
	opts := []httplimit.Option{
		httplimit.WithIdentity(func(r *http.Request) dsl.Request {
			if id, ok := r.Context().Value(identityKey{}).(*identity); ok {
				return id
			}
			return nil
		}),
		httplimit.WithLegacyHeaders(),
	}
	if len(trusted) > 0 {
		opts = append(opts, httplimit.WithTrustedProxies("X-Forwarded-For", trusted...))
	}
	return authenticate(httplimit.Middleware(e, opts...)(mux))
}
