package serve

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
)

//go:embed openapi.json
var openapi []byte

// maxBody bounds a request body of the HTTP API; maxBatch the requests of one decision.
const (
	maxBody  = 1 << 20
	maxBatch = 256
)

// Handler returns the HTTP JSON API, described by the OpenAPI document it serves at
// GET /openapi.json:
//
//	POST /v1/decide   decide and charge one request, or several as one (engine.AllowAll)
//	POST /v1/peek     what /v1/decide would answer, charging nothing
//	POST /v1/release  give back the concurrency leases of an allowed decision
//	GET  /healthz     200 while the server has policies to decide
//
// A decision is always 200 with the verdict in the body (allowed or not) and the
// RateLimit fields in the response's headers; 400 is a body that is not a decision
// request or that a policy cannot evaluate, 503 a backend failure that the policy's
// on_error does not cover. Errors are application/problem+json (RFC 9457).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/decide", func(w http.ResponseWriter, r *http.Request) { s.decide(w, r, false) })
	mux.HandleFunc("POST /v1/peek", func(w http.ResponseWriter, r *http.Request) { s.decide(w, r, true) })
	mux.HandleFunc("POST /v1/release", s.release)
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
	Requests   []struct {
		Attributes map[string]string `json:"attributes"`
		Cost       *int64            `json:"cost"`
	} `json:"requests"`
}

type decisionBody struct {
	Allowed bool   `json:"allowed"`
	Source  string `json:"source"`
	// RetryAfterMs is, when denied, the milliseconds until the same request may pass,
	// rounded up; -1 when it never can (its cost exceeds a limit).
	RetryAfterMs int64      `json:"retry_after_ms"`
	Decider      string     `json:"decider,omitempty"`
	Lease        string     `json:"lease,omitempty"`
	Rules        []ruleBody `json:"rules"`
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
	var body decideRequest
	if err := readJSON(w, r, &body); err != nil {
		problem(w, http.StatusBadRequest, "Not a decision request", err.Error())
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
	case body.Requests != nil && (body.Attributes != nil || body.Cost != nil):
		problem(w, http.StatusBadRequest, "Not a decision request", "give either attributes (and cost) or requests, not both")
		return
	case body.Requests != nil:
		if len(body.Requests) == 0 || len(body.Requests) > maxBatch {
			problem(w, http.StatusBadRequest, "Not a decision request", fmt.Sprintf("requests must hold 1 to %d requests, not %d", maxBatch, len(body.Requests)))
			return
		}
		for _, q := range body.Requests {
			rs, ns = append(rs, engine.Attrs(q.Attributes)), append(ns, cost(q.Cost))
		}
	default:
		rs, ns = []dsl.Request{engine.Attrs(body.Attributes)}, []int64{cost(body.Cost)}
	}
	e := s.Engine()
	d, err := e.AllowAll(r.Context(), rs, ns)
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
	httplimit.Headers(w.Header(), d)
	writeJSON(w, http.StatusOK, out)
}

type releaseRequest struct {
	Lease string `json:"lease"`
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	var body releaseRequest
	if err := readJSON(w, r, &body); err != nil || body.Lease == "" {
		detail := "the body must be {\"lease\": \"<id from /v1/decide>\"}"
		if err != nil {
			detail = err.Error()
		}
		problem(w, http.StatusBadRequest, "Not a release request", detail)
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

// ms is d in whole milliseconds rounded up; -1 for engine.Never.
func ms(d time.Duration) int64 {
	if d == engine.Never {
		return -1
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the body is not the JSON this endpoint takes: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
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
