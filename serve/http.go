package serve

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
)

//go:embed openapi.json
var openapi []byte

// Handler returns the HTTP JSON API, described by the OpenAPI document it serves at
// GET /openapi.json:
//
//	POST /v1/decide   decide and charge one request, or several as one (engine.AllowAll);
//	                  with at_most, grant the most of one request's cost that fits
//	                  (engine.AllowAtMost); ?deny_status=429 answers a denial 429
//	POST /v1/peek     every rule's state, charging nothing (engine.Peek): a decision of
//	                  cost 0, so a spent limit peeks allowed with remaining 0; a penalty
//	                  box's block or a deny list shows as a denial
//	                  with settle, charge one request's estimated cost and answer a
//	                  reservation (engine.Reserve)
//	POST /v1/release  give back the concurrency leases of an allowed decision
//	POST /v1/settle   settle a reservation with the request's true cost: the
//	                  difference given back, or the overdraft owed (Reservation.Settle);
//	                  one not settled within ReservationTTL keeps its estimate
//	POST /v1/reset    forget a request's counters and blocks (engine.Reset): every key of the
//	                  rules that apply to it starts afresh; callers with the admin
//	                  right only (Config.Admin: 403 otherwise), each reset logged
//	POST /v1/overrides/set, /clear   give one key of an overridable rule other figures,
//	                  or take them back (engine.SetOverride, engine.ClearOverride): the
//	                  admin right only, each change logged
//	POST /v1/overrides/get   the override in force for a request's key of a rule
//	                  (engine.Override), or null
//	POST /v1/lists/add, /remove   put on a runtime list, or take off it, the key a
//	                  request has in every rule naming the list (engine.AddToList,
//	                  engine.RemoveFromList): the admin right only, each change logged
//	POST /v1/lists/get   whether each of those keys is on the list (engine.InList)
//	POST /v1/inspect   what every rule that applies to a request sees of it, charging
//	                  nothing (engine.Inspect): the peek's verdict, the penalty box's
//	                  block, the override in force and the lists the key is on; each
//	                  inspection logged
//	POST /json        Envoy's RateLimitRequest in protobuf's JSON form, answered as
//	                  envoyproxy/ratelimit's /json (429 when over the limit)
//	GET  /healthz     200 while the server has policies to decide
//
// A decision is 200 with the verdict in the body (allowed or not) and the RateLimit
// fields in the response's headers (Retry-After too when denied). /v1/decide?deny_status=429
// makes a denial 429 instead, with the same body and fields, for a client or proxy that
// acts on the status (envoyproxy/ratelimit's /json answers so); 429 is the only status it
// takes, once, on /v1/decide only (400 otherwise). 400 is a body that is not a decision
// request or that a policy cannot evaluate, 503 a backend failure that the policy's
// on_error does not cover. Errors are application/problem+json (RFC 9457).
//
// A POST's body must be JSON, sent as Content-Type application/json (415 otherwise: a
// browser page may post text/plain to any site, but not JSON), of at most MaxBodyBytes
// (413), and UTF-8 throughout with no escape of a lone surrogate (400: encoding/json
// would read either as U+FFFD, making distinct byte strings one counter). A decision
// request past MaxBatch, MaxAttributes, MaxNameBytes or MaxValueBytes is 400, naming
// the limit.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/decide", func(w http.ResponseWriter, r *http.Request) { s.decide(w, r, false) })
	mux.HandleFunc("POST /v1/peek", func(w http.ResponseWriter, r *http.Request) { s.decide(w, r, true) })
	mux.HandleFunc("POST /v1/release", s.release)
	mux.HandleFunc("POST /v1/settle", s.settle)
	mux.HandleFunc("POST /v1/reset", s.reset)
	mux.HandleFunc("POST /v1/overrides/{op}", s.override)
	mux.HandleFunc("POST /v1/lists/{op}", s.list)
	mux.HandleFunc("POST /v1/inspect", s.inspect)
	mux.HandleFunc("POST /json", s.envoyJSON)
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapi)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// decideRequest is the body of /v1/decide and /v1/peek: one request (attributes and cost)
// or several (requests).
type decideRequest struct {
	Attributes map[string]string `json:"attributes"`
	Cost       *int64            `json:"cost"`
	// AtMost makes one request (attributes and cost) a partial admission of up to cost
	// units (engine.AllowAtMost): the answer's granted says how many were charged.
	AtMost bool `json:"at_most"`
	// MaxDelayMs lets one request (attributes, cost 1) wait up to that many milliseconds
	// for its turn rather than be denied (engine.Wait): the answer comes when its slot
	// does, with delay_ms the wait; a client that hangs up gives the slot back.
	MaxDelayMs *int64 `json:"max_delay_ms"`
	// Settle makes one request (attributes and cost, the estimate) a reservation
	// (engine.Reserve): the answer's reservation is the id /v1/settle takes with the
	// true cost.
	Settle   bool `json:"settle"`
	Requests []struct {
		Attributes map[string]string `json:"attributes"`
		Cost       *int64            `json:"cost"`
	} `json:"requests"`
}

type decisionBody struct {
	Allowed bool   `json:"allowed"`
	Source  string `json:"source"`
	// RetryAfterMs is, when denied, the milliseconds until the same request may pass,
	// rounded up; -1 when it never can (its cost exceeds a limit).
	RetryAfterMs int64  `json:"retry_after_ms"`
	Decider      string `json:"decider,omitempty"`
	// Granted, for a request with at_most, is the units granted and charged (0 when
	// denied).
	Granted *int64 `json:"granted,omitempty"`
	// DelayMs, for a request with max_delay_ms, is how long it waited for its turn.
	DelayMs *int64 `json:"delay_ms,omitempty"`
	Lease   string `json:"lease,omitempty"`
	// Reservation, for an allowed request with settle, is the id to give /v1/settle.
	Reservation string     `json:"reservation,omitempty"`
	Rules       []ruleBody `json:"rules"`
}

type ruleBody struct {
	Policy       string `json:"policy"`
	Rule         string `json:"rule"`
	Algorithm    string `json:"algorithm"`
	Shadow       bool   `json:"shadow"`
	Allowed      bool   `json:"allowed"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
	WindowMs     int64  `json:"window_ms"`
	Request      int    `json:"request"`
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, peek bool) {
	denied, err := denyStatus(r, peek)
	if err != nil {
		problem(w, http.StatusBadRequest, "Not a decision request", err.Error())
		return
	}
	var body decideRequest
	if err := readJSON(w, r, &body); err != nil {
		refuse(w, "Not a decision request", err)
		return
	}
	var rs []dsl.Request
	var ns []int64
	cost := func(c *int64) int64 {
		switch {
		case peek:
			return 0
		case c == nil:
			return 1
		}
		return *c
	}
	switch {
	case body.AtMost && (peek || body.Requests != nil):
		problem(w, http.StatusBadRequest, "Not a decision request", "at_most applies to one request (attributes and cost) of /v1/decide, not to requests nor to /v1/peek")
		return
	case body.AtMost && body.Cost != nil && *body.Cost < 1:
		problem(w, http.StatusBadRequest, "Not a decision request", "at_most needs a cost of at least 1: the most units to grant")
		return
	case body.MaxDelayMs != nil && (peek || body.Requests != nil || body.AtMost || body.Cost != nil && *body.Cost != 1):
		problem(w, http.StatusBadRequest, "Not a decision request", "max_delay_ms applies to one request of cost 1 (attributes) of /v1/decide, not to requests, at_most, other costs, nor to /v1/peek")
		return
	case body.Settle && (peek || body.Requests != nil || body.AtMost || body.MaxDelayMs != nil):
		problem(w, http.StatusBadRequest, "Not a decision request", "settle applies to one request (attributes and cost, the estimate) of /v1/decide, not to requests, at_most, max_delay_ms, nor to /v1/peek")
		return
	case body.MaxDelayMs != nil && (*body.MaxDelayMs < 0 || *body.MaxDelayMs > MaxDelayMs):
		problem(w, http.StatusBadRequest, "Not a decision request", fmt.Sprintf("max_delay_ms must be from 0 to %d (MaxDelayMs), not %d", MaxDelayMs, *body.MaxDelayMs))
		return
	case body.Requests != nil && (body.Attributes != nil || body.Cost != nil):
		problem(w, http.StatusBadRequest, "Not a decision request", "give either attributes (and cost) or requests, not both")
		return
	case body.Requests != nil:
		if len(body.Requests) == 0 || len(body.Requests) > MaxBatch {
			problem(w, http.StatusBadRequest, "Not a decision request", fmt.Sprintf("requests must hold 1 to %d requests (MaxBatch), not %d", MaxBatch, len(body.Requests)))
			return
		}
		for i, q := range body.Requests {
			if err := checkAttributes(q.Attributes); err != nil {
				problem(w, http.StatusBadRequest, "Not a decision request", fmt.Sprintf("request %d: %v", i, err))
				return
			}
			rs, ns = append(rs, engine.Attrs(q.Attributes)), append(ns, cost(q.Cost))
		}
	default:
		if err := checkAttributes(body.Attributes); err != nil {
			problem(w, http.StatusBadRequest, "Not a decision request", err.Error())
			return
		}
		rs, ns = []dsl.Request{engine.Attrs(body.Attributes)}, []int64{cost(body.Cost)}
	}
	e := s.Engine()
	var d *engine.Decision
	var res *engine.Reservation
	switch {
	case body.Settle:
		if res, err = e.Reserve(r.Context(), rs[0], ns[0]); err == nil {
			d = res.Decision
		}
	case body.AtMost:
		d, err = e.AllowAtMost(r.Context(), rs[0], ns[0])
	case body.MaxDelayMs != nil:
		d, err = e.Wait(r.Context(), rs[0], time.Duration(*body.MaxDelayMs)*time.Millisecond)
	default:
		d, err = e.AllowAll(r.Context(), rs, ns)
	}
	if err != nil {
		if errors.Is(err, engine.ErrRequest) {
			problem(w, http.StatusBadRequest, "The policies cannot decide this request", err.Error())
		} else {
			problem(w, http.StatusServiceUnavailable, "The backend failed", err.Error())
		}
		return
	}
	out := decisionBody{Allowed: d.Allowed, Source: d.Source.String(), RetryAfterMs: ms(d.RetryAfter), Rules: make([]ruleBody, len(d.Rules))}
	if d.Decider >= 0 {
		out.Decider = d.Rules[d.Decider].Policy + "." + d.Rules[d.Decider].Rule
	}
	if body.AtMost {
		out.Granted = &d.Granted
	}
	if body.MaxDelayMs != nil {
		waited := ms(d.Delay)
		out.DelayMs = &waited
	}
	for i, rr := range d.Rules {
		out.Rules[i] = ruleBody{
			Policy: rr.Policy, Rule: rr.Rule, Algorithm: rr.Algorithm, Shadow: rr.Shadow, Allowed: rr.Allowed,
			Limit: rr.Limit, Remaining: rr.Remaining, RetryAfterMs: ms(rr.RetryAfter), ResetAfterMs: ms(rr.ResetAfter),
			WindowMs: ms(rr.Window), Request: rr.Request,
		}
	}
	if d.Allowed && d.Holds() {
		if out.Lease = s.leases.keep(e, d); out.Lease == "" {
			s.log.Warn("rlctl serve: too many unreleased leases; this one ends at its rule's ttl", "limit", maxLeases)
		}
	}
	if res != nil && d.Allowed {
		if out.Reservation = s.reservations.reserve(res); out.Reservation == "" {
			s.log.Warn("rlctl serve: too many unsettled reservations; this one keeps its estimate", "limit", maxLeases)
		}
	}
	httplimit.Headers(w.Header(), d)
	code := http.StatusOK
	if !d.Allowed {
		code = denied
	}
	writeJSON(w, code, out)
}

// denyStatus is the status of a denied decision's answer: 200, or 429 when /v1/decide's
// query asks for it with deny_status=429. Any other value, the parameter given twice or
// on /v1/peek (which answers what a decision would be, not a decision) is an error that
// says so.
func denyStatus(r *http.Request, peek bool) (int, error) {
	vs, ok := r.URL.Query()["deny_status"]
	switch {
	case !ok:
		return http.StatusOK, nil
	case peek:
		return 0, errors.New("deny_status applies to /v1/decide, not to /v1/peek: a peek's verdict is always 200")
	case len(vs) != 1 || vs[0] != "429":
		return 0, fmt.Errorf("deny_status must be 429 (Too Many Requests), given once, not %q", strings.Join(vs, "&"))
	}
	return http.StatusTooManyRequests, nil
}

type releaseRequest struct {
	Lease string `json:"lease"`
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	var body releaseRequest
	if err := readJSON(w, r, &body); err != nil {
		refuse(w, "Not a release request", err)
		return
	}
	if body.Lease == "" {
		problem(w, http.StatusBadRequest, "Not a release request", "the body must be {\"lease\": \"<id from /v1/decide>\"}")
		return
	}
	h, ok := s.leases.take(body.Lease)
	if !ok {
		problem(w, http.StatusNotFound, "No such lease", "the lease was released already, has expired at its rule's ttl, or was never given")
		return
	}
	_ = h.e.Release(r.Context(), h.d)
	writeJSON(w, http.StatusOK, map[string]bool{"released": true})
}

type settleRequest struct {
	Reservation string `json:"reservation"`
	Cost        *int64 `json:"cost"`
}

// settle settles a reservation of /v1/decide with its true cost (engine.Reservation's
// Settle): 200 once settled, 404 for an id unknown, settled or past ReservationTTL, 400
// for a cost the reservation's rules cannot settle (the reservation stays open).
func (s *Server) settle(w http.ResponseWriter, r *http.Request) {
	var body settleRequest
	if err := readJSON(w, r, &body); err != nil {
		refuse(w, "Not a settle request", err)
		return
	}
	if body.Reservation == "" || body.Cost == nil {
		problem(w, http.StatusBadRequest, "Not a settle request", "the body must be {\"reservation\": \"<id from /v1/decide>\", \"cost\": <the true cost>}")
		return
	}
	h, ok := s.reservations.take(body.Reservation)
	if !ok || h.res == nil {
		problem(w, http.StatusNotFound, "No such reservation", "the reservation was settled already, was kept past its time (it keeps its estimate), or was never given")
		return
	}
	if err := h.res.Settle(r.Context(), *body.Cost); err != nil {
		if errors.Is(err, engine.ErrRequest) {
			s.reservations.restore(body.Reservation, h)
			problem(w, http.StatusBadRequest, "The reservation cannot settle at this cost", err.Error())
		} else {
			problem(w, http.StatusServiceUnavailable, "The backend failed", err.Error())
		}
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"settled": true})
}

type resetRequest struct {
	Attributes map[string]string `json:"attributes"`
}

// reset forgets the counters of the rules that apply to a request: an operator's unblock.
// It needs the admin right, and logs who asked for which request at warn level: an audit
// trail of every reset, done or refused.
func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	if s.admin == nil || !s.admin(r) {
		s.log.Warn("rlctl serve: reset refused: no admin right", "remote", r.RemoteAddr)
		problem(w, http.StatusForbidden, "Forbidden", "resetting counters needs the admin right: an Authorization: Bearer token listed as \"admin TOKEN\" in rlctl serve -auth-tokens")
		return
	}
	var body resetRequest
	if err := readJSON(w, r, &body); err != nil {
		refuse(w, "Not a reset request", err)
		return
	}
	if body.Attributes == nil {
		problem(w, http.StatusBadRequest, "Not a reset request", "the body must be {\"attributes\": {...}}: the request whose counters to forget")
		return
	}
	if err := checkAttributes(body.Attributes); err != nil {
		problem(w, http.StatusBadRequest, "Not a reset request", err.Error())
		return
	}
	err := s.Engine().Reset(r.Context(), engine.Attrs(body.Attributes))
	s.log.Warn("rlctl serve: reset", "remote", r.RemoteAddr, "attributes", body.Attributes, "ok", err == nil)
	if err != nil {
		if errors.Is(err, engine.ErrRequest) {
			problem(w, http.StatusBadRequest, "The policies cannot evaluate this request", err.Error())
		} else {
			problem(w, http.StatusServiceUnavailable, "The backend failed", err.Error())
		}
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
}

// ms is d in whole milliseconds rounded up; -1 for engine.Never.
func ms(d time.Duration) int64 {
	if d == engine.Never {
		return -1
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// bodyError is a request body refused for its form rather than its content: Status is
// 413 or 415.
type bodyError struct {
	Status int
	Title  string
	Detail string
}

func (e *bodyError) Error() string { return e.Detail }

// refuse writes the problem for err, an error of readJSON: a bodyError's own status and
// title, else 400 with title.
func refuse(w http.ResponseWriter, title string, err error) {
	if be, ok := errors.AsType[*bodyError](err); ok {
		problem(w, be.Status, be.Title, be.Detail)
		return
	}
	problem(w, http.StatusBadRequest, title, err.Error())
}

// readJSON decodes r's body, a single JSON value, into v. It refuses a body that is
// not Content-Type application/json (415) or longer than MaxBodyBytes (413), both as a
// *bodyError, and one that is not UTF-8 or escapes a lone surrogate.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the body is not the JSON this endpoint takes: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

// readBody reads r's JSON body, refusing as readJSON does.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if err := jsonContentType(r.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &bodyError{Status: http.StatusRequestEntityTooLarge, Title: "Request body too large", Detail: fmt.Sprintf("the body is more than the %d bytes a request may be (MaxBodyBytes)", MaxBodyBytes)}
		}
		return nil, fmt.Errorf("the body could not be read: %v", err)
	}
	return b, checkText(b)
}

// envoyJSON is POST /json: envoyproxy/ratelimit's endpoint for clients that cannot speak
// gRPC. The body is a RateLimitRequest in protobuf's JSON form, the answer the
// RateLimitResponse in the same form: 200, or 429 when OVER_LIMIT; 400 for a body that is
// not a request or a request ShouldRateLimit refuses, 503 for a backend failure that
// on_error does not cover (problem+json).
func (s *Server) envoyJSON(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(w, r)
	if err != nil {
		refuse(w, "Not a rate limit request", err)
		return
	}
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(b, &req); err != nil {
		problem(w, http.StatusBadRequest, "Not a rate limit request", "the body is not an envoy.service.ratelimit.v3.RateLimitRequest in JSON: "+err.Error())
		return
	}
	resp, err := s.shouldRateLimit(r.Context(), &req)
	if err != nil {
		code := http.StatusBadRequest
		if status.Code(err) == codes.Unavailable {
			code = http.StatusServiceUnavailable
		}
		problem(w, code, "Not decided", status.Convert(err).Message())
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		problem(w, http.StatusInternalServerError, "Not encoded", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	_, _ = w.Write(out)
}

// jsonContentType refuses (415) a Content-Type other than application/json, with no
// charset but UTF-8.
func jsonContentType(ct string) error {
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" && (params["charset"] == "" || strings.EqualFold(params["charset"], "utf-8")) {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return &bodyError{Status: http.StatusUnsupportedMediaType, Title: "Unsupported media type", Detail: fmt.Sprintf("the body must be sent as Content-Type: application/json (UTF-8), not %s", ct)}
}

// checkText refuses a JSON body that encoding/json would decode lossily: bytes that are
// not UTF-8, or a \u escape of a surrogate that is not half of a pair. Either would
// become U+FFFD, so distinct values would be one counter.
func checkText(b []byte) error {
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("the body is not UTF-8 (byte %d): rlctl takes UTF-8 text only, so that two byte strings are never one counter", i)
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		// Outside strings a backslash is not JSON at all (the decoder refuses it); inside,
		// it starts an escape, which is skipped whole.
		i++
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		r, ok := hex4(b[i+1:])
		if !ok {
			continue // not JSON: the decoder refuses it
		}
		i += 4
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return loneSurrogate(r)
		case r >= 0xd800 && r <= 0xdbff:
			if len(b) < i+3 || b[i+1] != '\\' || b[i+2] != 'u' {
				return loneSurrogate(r)
			}
			lo, ok := hex4(b[i+3:])
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return loneSurrogate(r)
			}
			i += 6
		}
	}
	return nil
}

func loneSurrogate(r rune) error {
	return fmt.Errorf("the body escapes a lone surrogate (\\u%04x), which is no character: rlctl takes UTF-8 text only, so that two strings are never one counter", r)
}

// hex4 is the value of the four hex digits b starts with.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// problem writes an RFC 9457 problem.
func problem(w http.ResponseWriter, code int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": title, "status": code, "detail": detail})
}
