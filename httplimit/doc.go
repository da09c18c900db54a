// Package httplimit is net/http middleware that decides every request with an
// [engine.Engine] and answers with the IETF RateLimit header fields
// (draft-ietf-httpapi-ratelimit-headers-10), Retry-After (RFC 9110) and, when a request is
// refused, an RFC 9457 problem document.
//
//	h := httplimit.Middleware(e,
//		httplimit.WithTrustedProxies("X-Forwarded-For", netip.MustParsePrefix("10.0.0.0/8")),
//		httplimit.WithIdentity(func(r *http.Request) dsl.Request { return userFrom(r.Context()) }),
//	)(mux)
//
// # Request attributes
//
// Policies read these attributes (request.<name>); an attribute without a value is "":
//
//	ip              the client address, canonical (IPv4 as 192.0.2.1, IPv6 compressed,
//	                no zone, IPv4-mapped IPv6 as IPv4): the direct peer (RemoteAddr), or,
//	                when the peer is a trusted proxy, the address that proxy chain reports
//	                (see WithTrustedProxies); "" when RemoteAddr is not an address
//	method          the request method, as sent ("GET")
//	path            the URL path, decoded and not cleaned (r.URL.Path)
//	host            the Host header without a port, lower case
//	content_length  the declared body length in bytes; "" when unknown (chunked)
//
// and whatever the options add: WithHeader maps a request header to an attribute,
// WithAttr computes one, and WithIdentity supplies the authenticated caller's attributes
// (conventionally user, tenant, plan). Nothing else is read from the request: header
// values are sent by the client, so a policy sees one only when the server maps it.
// Explicit attributes (WithAttr, WithHeader) take precedence over the built-in ones, which
// take precedence over the identity.
//
// # Response
//
// Only enforcing rules appear in headers; shadow rules never change a response. Each
// enforcing rule is a quota policy named "<policy>.<rule>" (or "<rule>" with
// WithShortNames):
//
//	RateLimit-Policy: "public_api.per_user";q=20;w=2, "public_api.per_tenant";q=10000;w=60
//	RateLimit: "public_api.per_user";r=7;t=2
//
// RateLimit-Policy lists every enforcing rule that applied: q is the rule's limit, w its
// window in seconds rounded up (the refill time from empty for bucket algorithms; absent
// for concurrency rules, whose quota unit qu is "concurrent-requests"). RateLimit lists
// the rule closest to exhaustion (lowest remaining/limit), or every rule with WithAllRules:
// r is what remains, t the seconds, rounded up, until the rule lets the request through
// (a rule that refused it) or until its key is back to its full quota (a rule that allowed
// it: an upper bound on when more quota arrives; no t for a concurrency rule, whose quota
// comes back when requests finish). WithPartitionKeys adds pk, a keyed hash of the
// counter's key, never the key itself.
//
// A refused request gets 429 Too Many Requests, or 503 Service Unavailable when every rule
// that refused it is a concurrency limit or a policy refusing requests because its backend
// is down (on_error = "deny"), with Retry-After in whole seconds rounded up: the engine's
// retry-after, never earlier than the t of any RateLimit item. When the request can never
// pass (its cost exceeds a rule's capacity) there is no Retry-After, and the problem detail
// says why. The body is application/problem+json:
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
//	 "title":"Too Many Requests","status":429,
//	 "detail":"\"public_api.per_user\" allows 20 per 2s and that quota is used up. Retry in 1s.",
//	 "violated-policies":["public_api.per_user"]}
//
// with type …#temporary-reduced-capacity for a 503. On a refused request, RateLimit shows
// the refusing rule with the longest wait; other rules there carry no t, so that nothing in
// the response points later than Retry-After. WithDeniedHandler replaces the body and
// status; the headers are set before it runs.
//
// # Failures
//
// A Redis failure or a script error is not an error here: each policy's on_error already
// decided the request. Decisions made without the backend (on_error "allow" or "deny")
// have no counters, so they send no RateLimit fields. The engine returns an error only when
// a policy expression fails for the request (engine.ErrRequest), or when the request's
// context ended before a decision (the client went away, or a server-side deadline
// passed). By default the middleware then answers 500 (a bad request expression) or 503
// (the context ended) with a problem document and does not run the handler: failing open
// would let any request that breaks an expression bypass every limit. WithErrorHandler
// changes that.
//
// # Concurrency leases
//
// A request allowed by a concurrency rule holds a lease until the handler returns,
// normally or by panicking (the panic continues after the release). A release that fails
// leaves the lease to expire after the rule's ttl.
package httplimit
