package serve

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/engine"
)

// settlePolicy gives each user 100 tokens a second (gcra, burst 100), and each user's
// uploads 5 a minute counted exactly (sliding_log, which carries no debt).
const settlePolicy = `
policy "llm" {
  match = request.path == "/chat"
  rule "tokens" {
    algorithm = "gcra"
    key       = request.user
    rate      = "100/s"
    burst     = 100
  }
}
policy "uploads" {
  match = request.path == "/upload"
  rule "per_user" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = 5
    window    = "1m"
  }
}
`

type settleBody struct {
	Settled bool   `json:"settled"`
	Detail  string `json:"detail"` // of a problem
}

// TestHTTPSettle: /v1/decide with settle charges the estimate and answers a reservation;
// /v1/settle above it charges the overdraft, which the key owes (denied with the exact
// retry-after until earned back), below it gives the difference back; a reservation
// settles once, is forgotten after ReservationTTL, and one refused (an overdraft on a rule
// that carries no debt) stays open; malformed requests are 400 saying why; on both
// backends.
func TestHTTPSettle(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			f := startWith(t, backend, map[string]string{"llm.hcl": settlePolicy}, func(c *Config) {
				// A refund gives back what the charge still weighs when it reaches the
				// backend, at most the engine's timeout later.
				c.Engine = append(c.Engine, engine.WithTimeout(50*time.Millisecond))
			})
			reserve := func(body string) decisionBody {
				t.Helper()
				var d decisionBody
				if code, _ := f.post(t, "/v1/decide", body, &d); code != http.StatusOK {
					t.Fatalf("%s: %d %+v", body, code, d)
				}
				return d
			}
			settle := func(id string, cost int64, wantCode int) {
				t.Helper()
				var s settleBody
				body := `{"reservation": "` + id + `", "cost": ` + strconv.FormatInt(cost, 10) + `}`
				if code, _ := f.post(t, "/v1/settle", body, &s); code != wantCode || (code == http.StatusOK) != s.Settled {
					t.Fatalf("settle %s: %d %+v, want %d", body, code, s, wantCode)
				}
			}
			const chat = `{"attributes": {"path": "/chat", "user": "ann"}, "cost": 60, "settle": true}`
			d := reserve(chat)
			if !d.Allowed || d.Reservation == "" || d.Rules[0].Remaining != 40 {
				t.Fatalf("reserve 60 of 100: %+v, want allowed, a reservation, 40 remaining", d)
			}
			settle(d.Reservation, 150, http.StatusOK) // 90 over the estimate: 50 in debt
			settle(d.Reservation, 150, http.StatusNotFound)
			one := `{"attributes": {"path": "/chat", "user": "ann"}}`
			if d := reserve(one); d.Allowed || d.RetryAfterMs != 510 {
				t.Fatalf("in debt of 50 tokens: %+v, want denied for 510ms (51 tokens at 100/s)", d)
			}
			f.clock.Advance(509 * time.Millisecond)
			if d := reserve(one); d.Allowed || d.RetryAfterMs != 1 {
				t.Fatalf("1ms before the debt is earned back: %+v, want denied for 1ms", d)
			}
			f.clock.Advance(time.Millisecond)
			if d := reserve(one); !d.Allowed || d.Rules[0].Remaining != 0 {
				t.Fatalf("the debt earned back: %+v, want allowed with 0 remaining", d)
			}

			f.clock.Advance(time.Second) // full again
			d = reserve(chat)
			settle(d.Reservation, 10, http.StatusOK) // 50 given back
			if d := reserve(one); !d.Allowed || d.Rules[0].Remaining != 89 {
				t.Fatalf("after a refund of 50: %+v, want 89 remaining (100 − 10 − 1)", d)
			}

			d = reserve(chat)
			f.clock.Advance(ReservationTTL)
			settle(d.Reservation, 0, http.StatusNotFound)

			const upload = `{"attributes": {"path": "/upload", "user": "ann"}, "cost": 2, "settle": true}`
			d = reserve(upload)
			if !d.Allowed || d.Reservation == "" || d.Rules[0].Remaining != 3 {
				t.Fatalf("reserve 2 of 5 uploads: %+v", d)
			}
			var p settleBody
			if code, _ := f.post(t, "/v1/settle", `{"reservation": "`+d.Reservation+`", "cost": 3}`, &p); code != http.StatusBadRequest || !strings.Contains(p.Detail, "carries no debt") {
				t.Fatalf("overdraft on sliding_log: %d %+v, want 400 saying it carries no debt", code, p)
			}
			settle(d.Reservation, 1, http.StatusOK) // still open: settled below the estimate
			if d := reserve(`{"attributes": {"path": "/upload", "user": "ann"}, "cost": 0}`); d.Rules[0].Remaining != 4 {
				t.Fatalf("after settling 1 of 2: %+v, want 4 remaining", d)
			}

			d = reserve(`{"attributes": {"path": "/upload", "user": "ann"}, "cost": 9, "settle": true}`)
			if d.Allowed || d.Reservation != "" {
				t.Fatalf("a denied reservation: %+v, want no reservation id", d)
			}
			for _, bad := range []struct{ path, body string }{
				{"/v1/decide", `{"attributes": {"user": "ann"}, "settle": true, "at_most": true}`},
				{"/v1/decide", `{"attributes": {"user": "ann"}, "settle": true, "max_delay_ms": 10}`},
				{"/v1/decide", `{"requests": [{"attributes": {"user": "ann"}}], "settle": true}`},
				{"/v1/peek", `{"attributes": {"user": "ann"}, "settle": true}`},
				{"/v1/settle", `{"reservation": "x"}`},
				{"/v1/settle", `{"cost": 1}`},
				{"/v1/settle", `{"reservation": "x", "cost": 1, "extra": 1}`},
			} {
				var p settleBody
				if code, _ := f.post(t, bad.path, bad.body, &p); code != http.StatusBadRequest || p.Detail == "" {
					t.Errorf("%s %s: %d %+v, want 400 saying why", bad.path, bad.body, code, p)
				}
			}
			var q settleBody
			if code, _ := f.post(t, "/v1/settle", `{"reservation": "nope", "cost": 1}`, &q); code != http.StatusNotFound {
				t.Errorf("an unknown reservation: %d %+v, want 404", code, q)
			}
			d = reserve(chat)
			if code, _ := f.post(t, "/v1/settle", `{"reservation": "`+d.Reservation+`", "cost": -1}`, &q); code != http.StatusBadRequest || q.Detail == "" {
				t.Errorf("a negative cost: %d %+v, want 400 saying why", code, q)
			}
			settle(d.Reservation, 60, http.StatusOK)
		})
	}
}
