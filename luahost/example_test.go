package luahost_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

// A fixed-window counter on a simulated clock: the key expires when the
// clock passes the window.
func Example() {
	clock := luahost.NewManualClock(time.Unix(1764472786, 0))
	h := luahost.New(luahost.WithClock(clock))
	sha, err := h.Load(`
		local n = redis.call('INCR', KEYS[1])
		if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
		return n`)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		n, _ := h.EvalSHA(ctx, sha, []string{"hits"}, []string{"1000"})
		fmt.Print(n, " ")
	}
	clock.Advance(1001 * time.Millisecond)
	n, _ := h.EvalSHA(ctx, sha, []string{"hits"}, []string{"1000"})
	fmt.Println(n)
	// Output: 1 2 3 1
}

// Script errors come back as *ErrorReply, with Redis's text.
func ExampleErrorReply() {
	h := luahost.New()
	_, err := h.Eval(context.Background(), `return redis.call('GET', KEYS[1], 'extra')`, []string{"k"}, nil)
	fmt.Println(err)
	// Output: ERR Wrong number of args calling Redis command from script script: 9a62d62352598d33e229c400c371ade0669b551b, on @user_script:1.
}
