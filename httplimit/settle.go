package httplimit

import (
	"context"
	"net/http"

	"github.com/rlctl/rlctl/engine"
)

// WithSettle makes the middleware charge each request estimate units before its handler
// runs (engine.Engine.Reserve) and settle the true cost after it returns: the cost the
// handler reported with ReportCost (the tokens a model call used, the bytes sent), or the
// estimate when it reported none. A cost above the estimate is owed: the key is refused
// until it has earned the overdraft back (see engine.Reservation.Settle). An estimate of
// 0 admits any request whose key is not in debt and charges its whole cost afterwards.
// A request that concurrency rules apply to goes to the error handler (500 by default).
// Settled requests are never delayed: WithDelay does not apply to them.
func WithSettle(estimate int64) Option {
	return func(c *config) { c.settle, c.estimate = true, estimate }
}

// WithCountOnly counts only the requests whose outcome matches: count is called with the
// status the handler answered (200 when it wrote without one), and a request it returns
// false for is given its charge back (its settled cost is 0), so that, say, only failed
// logins count (func(s int) bool { return s == 401 }) or only server errors
// (func(s int) bool { return s >= 500 }). Each request is charged when it is admitted
// and given back afterwards, not charged afterwards: the limit is never exceeded by
// requests in flight together (a charge after the handler would admit every request in
// flight before the first failure counted). The price is the opposite race: while
// requests are in flight, their charges are held against the limit whatever their
// outcome, so a request may be refused that would have fitted once the others' outcomes
// were known; at most the requests in flight at once are held so. A charge given back
// late gives back only what it still weighs (engine.Reservation.Settle). With WithSettle,
// a matching request settles its reported cost; without it, each request is 1 unit.
func WithCountOnly(count func(status int) bool) Option {
	return func(c *config) { c.count = count }
}

// ReportCost reports the true cost of the request r, in units of the middleware's
// estimate (WithSettle), for its settlement when the handler returns; the last report
// counts. It reports whether the request is being settled: false when no settling
// middleware admitted it.
func ReportCost(r *http.Request, cost int64) bool {
	s, ok := r.Context().Value(settleKey{}).(*settlement)
	if ok {
		s.cost, s.reported = cost, true
	}
	return ok
}

type settleKey struct{}

// settlement is what the handler reports about a request being settled.
type settlement struct {
	cost     int64
	reported bool
}

// statusWriter records the status a handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer when it can (http.Flusher, as ResponseController).
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serveSettled runs next for a request the reservation res admitted and settles it when
// next returns, normally or by panicking (the panic continues after the settlement),
// even when the request's context is done.
func (c *config) serveSettled(w http.ResponseWriter, r *http.Request, next http.Handler, res *engine.Reservation) {
	s := &settlement{}
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		cost := c.estimate
		if !c.settle {
			cost = 1
		}
		if s.reported {
			cost = s.cost
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		if c.count != nil && !c.count(status) {
			cost = 0
		}
		// A failed settlement is logged by the engine; the response is already sent.
		_ = res.Settle(context.WithoutCancel(r.Context()), max(cost, 0))
	}()
	next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), settleKey{}, s)))
}
