package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rlctl/rlctl/engine"
)

// Problem types of draft-ietf-httpapi-ratelimit-headers-10, section "Problem Types".
const (
	typeQuotaExceeded   = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	typeReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// problem is an RFC 9457 problem document with the draft's violated-policies member.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	Violated []string `json:"violated-policies,omitempty"`
}

func writeProblem(w http.ResponseWriter, p *problem) {
	body, err := json.Marshal(p)
	if err != nil {
		// Only strings and an int: Marshal cannot fail.
		panic(err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// unavailable reports whether rr refused for lack of capacity rather than quota: a
// concurrency limit, or a policy refusing while its backend is down (no counter).
func unavailable(rr *engine.RuleResult) bool {
	return rr.Algorithm == "concurrency" || rr.Limit == 0
}

// deniedStatus is 503 when every enforcing rule that refused d is unavailable, else 429.
func deniedStatus(d *engine.Decision) int {
	for i := range d.Rules {
		rr := &d.Rules[i]
		if !rr.Shadow && !rr.Allowed && !unavailable(rr) {
			return http.StatusTooManyRequests
		}
	}
	return http.StatusServiceUnavailable
}

// deny writes the default refusal: the problem document for d. retry is the Retry-After
// sent in seconds, -1 when none.
func (c *config) deny(w http.ResponseWriter, d *engine.Decision, retry int64) {
	p := problem{Status: deniedStatus(d)}
	if p.Status == http.StatusTooManyRequests {
		p.Type, p.Title = typeQuotaExceeded, "Too Many Requests"
	} else {
		p.Type, p.Title = typeReducedCapacity, "Service Unavailable"
	}
	var parts []string
	for i := range d.Rules {
		rr := &d.Rules[i]
		if rr.Shadow || rr.Allowed {
			continue
		}
		name := c.itemName(rr)
		if slices.Contains(p.Violated, name) {
			continue
		}
		p.Violated = append(p.Violated, name)
		parts = append(parts, describe(rr, name))
	}
	detail := strings.Join(parts, "; ")
	switch {
	case d.RetryAfter == engine.Never:
		detail += ". No Retry-After is sent: no wait lets this request through."
	case retry >= 0:
		detail += fmt.Sprintf(". Retry in %ds.", retry)
	default:
		detail += "."
	}
	p.Detail = detail
	writeProblem(w, &p)
}

// describe says in words why rr refused a request.
func describe(rr *engine.RuleResult, name string) string {
	switch {
	case rr.Limit == 0:
		return fmt.Sprintf("%q refuses requests while the rate limiter's store is unavailable", name)
	case rr.Algorithm == "concurrency":
		return fmt.Sprintf("%q allows %d concurrent requests and all are in use", name, rr.Limit)
	case rr.RetryAfter == engine.Never:
		return fmt.Sprintf("%q allows at most %d%s and this request alone costs more", name, rr.Limit, per(rr.Window))
	default:
		return fmt.Sprintf("%q allows %d%s and that quota is used up", name, rr.Limit, per(rr.Window))
	}
}

func per(w time.Duration) string {
	if w <= 0 {
		return ""
	}
	s := w.String() // "1h0m0s", "1m30s", "2s"
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return " per " + s
}

// internalError is the default engine-error response, the handler not run: 503 when the
// request's context ended first, else 500.
func internalError(w http.ResponseWriter, r *http.Request, err error, _ http.Handler) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		writeProblem(w, &problem{
			Type:   "about:blank",
			Title:  "Service Unavailable",
			Status: http.StatusServiceUnavailable,
			Detail: "The request ended before the rate limiter decided it.",
		})
		return
	}
	writeProblem(w, &problem{
		Type:   "about:blank",
		Title:  "Internal Server Error",
		Status: http.StatusInternalServerError,
		Detail: "The rate limiter could not decide this request.",
	})
}
