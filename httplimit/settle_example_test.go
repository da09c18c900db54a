package httplimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
	"github.com/rlctl/rlctl/luahost"
)

// A model's answer costs the tokens it used, known once it is written: each request
// reserves an estimate of 500 tokens, and the handler reports the true cost. The first
// answer runs long and the user owes the 800 over it, so the next request, which needs 500
// tokens besides the debt of 300, is refused for the 48 seconds the bucket takes to earn
// 800. The clock is fixed only so the output is stable.
func ExampleWithSettle() {
	cfg, diags := dsl.Parse(map[string][]byte{"llm.hcl": []byte(`
policy "llm" {
  rule "tokens" {
    algorithm = "token_bucket"
    key       = request.user
    capacity  = 1000
    rate      = "1000/m"
  }
}`)})
	if diags.HasErrors() {
		log.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		log.Fatal(err)
	}
	clock := luahost.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	e := engine.New(engine.NewLocal(luahost.New(luahost.WithClock(clock))), plan, engine.WithClock(clock.Now))

	chat := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used := int64(1300) // the tokens the answer took
		httplimit.ReportCost(r, used)
		fmt.Fprintln(w, "answer")
	})
	h := httplimit.Middleware(e, httplimit.WithHeader("X-User", "user"), httplimit.WithSettle(500))(chat)

	for range 2 {
		r := httptest.NewRequest("POST", "/v1/chat", nil)
		r.Header.Set("X-User", "ann")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
		if v := w.Header().Get("Retry-After"); v != "" {
			fmt.Println("  Retry-After:", v)
		}
	}
	// Output:
	// 200 "llm.tokens";r=500;t=30
	// 429 "llm.tokens";r=0;t=48
	//   Retry-After: 48
}
