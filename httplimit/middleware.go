package httplimit

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

// Option configures the middleware.
type Option func(*config)

type config struct {
	proxies    proxies
	attrs      map[string]func(*http.Request) string
	identity   func(*http.Request) dsl.Request
	allRules   bool
	shortNames bool
	legacy     bool
	pkSecret   []byte
	denied     func(http.ResponseWriter, *http.Request, *engine.Decision)
	onError    func(http.ResponseWriter, *http.Request, error, http.Handler)
	maxDelay   time.Duration // WithDelay; 0: Allow
	settle     bool          // WithSettle
	estimate   int64         // WithSettle's estimate
	count      func(status int) bool
	// policyFields shares the RateLimit-Policy values (setHeaders); nil: none shared.
	policyFields *fields
}

// WithDelay makes the middleware delay a request rather than refuse it when its turn
// comes within max (engine.Engine.Wait): the request reserves the earliest slot the rules
// allow, waits for it, then runs the handler, as NGINX's limit_req with burst and delay
// does. A request whose turn is further away is refused as without the option. A client
// that goes away while its request waits gives the slot back, and the request ends with
// the error handler's response (503 by default). A request that concurrency rules apply
// to, or whose rules make several calls (a cluster without a shard, policies of both
// clocks), goes to the error handler (500 by default): use the option on policies whose
// rules reserve in one call.
func WithDelay(max time.Duration) Option { return func(c *config) { c.maxDelay = max } }

// WithTrustedProxies makes the ip attribute the address reported by a chain of trusted
// proxies instead of the direct peer. header is the field those proxies append their
// peer's address to: "X-Forwarded-For" (comma-separated addresses, optional ports) or
// "Forwarded" (RFC 7239 for= parameters); the other is never read. The header is read only
// when the peer is in one of the prefixes, and then from the right: trusted hops are
// skipped and the first untrusted address is the client, so addresses a client writes
// into the header itself are ignored. Without this option the header is never read.
// Repeated calls add prefixes; the last header wins.
func WithTrustedProxies(header string, prefixes ...netip.Prefix) Option {
	return func(c *config) {
		c.proxies.header = http.CanonicalHeaderKey(header)
		c.proxies.forwarded = strings.EqualFold(header, "Forwarded")
		for _, p := range prefixes {
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			c.proxies.nets = append(c.proxies.nets, p.Masked())
		}
	}
}

// WithHeader makes the request header field header (the first line of it) the attribute
// attr, e.g. WithHeader("X-Api-Key", "api_key"). Header values come from the client:
// map only what a policy may trust, and never an identity the server has not checked.
func WithHeader(header, attr string) Option {
	header = http.CanonicalHeaderKey(header)
	return WithAttr(attr, func(r *http.Request) string { return r.Header.Get(header) })
}

// WithAttr makes f compute the attribute name. It is called each time a policy reads the
// attribute and takes precedence over the built-in attributes and the identity.
func WithAttr(name string, f func(*http.Request) string) Option {
	return func(c *config) {
		if c.attrs == nil {
			c.attrs = map[string]func(*http.Request) string{}
		}
		c.attrs[name] = f
	}
}

// WithIdentity supplies the attributes of the authenticated caller, typically from a value
// an authentication middleware put in the request's context. f is called at most once per
// request, the first time a policy reads an attribute that is neither built in nor set by
// WithAttr or WithHeader; it returns nil for an anonymous request (every such attribute is
// then ""). engine.Attrs serves, as does any type with an Attr(string) string method,
// which costs no map.
func WithIdentity(f func(*http.Request) dsl.Request) Option {
	return func(c *config) { c.identity = f }
}

// WithAllRules makes the RateLimit field list every enforcing rule that applied, not only
// the one closest to exhaustion.
func WithAllRules() Option { return func(c *config) { c.allRules = true } }

// WithShortNames names quota policies by their rule alone ("per_user") instead of
// "<policy>.<rule>". Use it only when no two policies have a rule of the same name.
func WithShortNames() Option { return func(c *config) { c.shortNames = true } }

// WithLegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset
// (delay seconds) for the rule RateLimit shows first, for clients that predate the draft.
func WithLegacyHeaders() Option { return func(c *config) { c.legacy = true } }

// WithPartitionKeys adds pk, the partition key, to every item: the first 9 bytes of
// HMAC-SHA256(secret, the rule's counter key) as an RFC 9651 Byte Sequence. Requests that
// share a counter share a pk; the key itself (an address, a user name) is never sent, and
// without the secret it cannot be found by hashing guesses. Give every instance of a
// service the same secret so that pk is stable across them.
func WithPartitionKeys(secret []byte) Option {
	return func(c *config) { c.pkSecret = append([]byte{}, secret...) }
}

// WithDeniedHandler replaces the response to a refused request. The RateLimit fields and
// Retry-After are already set when f runs; f writes the status and body. The default
// writes the problem document described in the package documentation.
func WithDeniedHandler(f func(w http.ResponseWriter, r *http.Request, d *engine.Decision)) Option {
	return func(c *config) { c.denied = f }
}

// WithErrorHandler sets what happens when the engine cannot decide a request (err wraps
// engine.ErrRequest, or is the request context's error). f either writes a response, or
// calls next.ServeHTTP(w, r) to serve the request unlimited. The default answers 500 (503
// when the context ended) with a problem document and does not run next.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error, next http.Handler)) Option {
	return func(c *config) { c.onError = f }
}

// Middleware returns middleware that decides each request with e (engine.Engine.Allow),
// sets the RateLimit fields, and either runs the next handler or refuses the request; see
// the package documentation for the attributes it gives policies and the responses.
func Middleware(e *engine.Engine, opts ...Option) func(http.Handler) http.Handler {
	c := &config{onError: internalError, policyFields: new(fields)}
	for _, o := range opts {
		o(c)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := &request{r: r, c: c}
			var d *engine.Decision
			var res *engine.Reservation
			var err error
			switch {
			case c.settle || c.count != nil:
				estimate := c.estimate
				if !c.settle {
					estimate = 1
				}
				if res, err = e.Reserve(r.Context(), q, estimate); err == nil {
					d = res.Decision
				}
			case c.maxDelay > 0:
				d, err = e.Wait(r.Context(), q, c.maxDelay)
			default:
				d, err = e.Allow(r.Context(), q)
			}
			if err != nil {
				c.onError(w, r, err, next)
				return
			}
			retry := c.setHeaders(w.Header(), d)
			if !d.Allowed {
				if c.denied != nil {
					c.denied(w, r, d)
				} else {
					c.deny(w, d, retry)
				}
				return
			}
			if res != nil {
				c.serveSettled(w, r, next, res)
				return
			}
			if mayHoldLease(d) {
				defer release(r.Context(), e, d)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// mayHoldLease reports whether d may hold a lease to give back: any rule but the built-in
// algorithms known to take none (a plugin may declare a lease parameter).
func mayHoldLease(d *engine.Decision) bool {
	for i := range d.Rules {
		switch d.Rules[i].Algorithm {
		case "fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra":
		default:
			return true
		}
	}
	return false
}

// release gives back d's leases, even when the request's context is done: the client
// leaving does not end the need to free the slot.
func release(ctx context.Context, e *engine.Engine, d *engine.Decision) {
	_ = e.Release(context.WithoutCancel(ctx), d)
}
