package luahost

import (
	"context"
	"strconv"
	"sync"
	"testing"
)

// A chunk compiled lately is not compiled again: the same name and source give the same
// prototype, another name or source another one, and the cache keeps only the latest.
func TestCompileKeepsLatest(t *testing.T) {
	a, err := compile("return 1", "a")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := compile("return 1", "a"); again != a {
		t.Error("the same chunk was compiled again")
	}
	if other, _ := compile("return 1", "b"); other == a {
		t.Error("a chunk of another name shares the prototype")
	}
	for i := range protoCacheSize {
		if _, err := compile("return "+strconv.Itoa(i+2), "a"); err != nil {
			t.Fatal(err)
		}
	}
	if again, _ := compile("return 1", "a"); again == a {
		t.Errorf("the cache holds more than %d chunks", protoCacheSize)
	}
	if _, err := compile("return (", "a"); err == nil {
		t.Error("a chunk that does not compile compiled")
	}
	protos.Lock()
	n := len(protos.m)
	protos.Unlock()
	if n > protoCacheSize {
		t.Errorf("%d chunks cached", n)
	}
}

// Hosts on several goroutines run one shared prototype (run under -race).
func TestSharedPrototypeAcrossHosts(t *testing.T) {
	const src = "local t = {} for i = 1, 50 do t[i] = ARGV[1] .. i end redis.call('SET', KEYS[1], t[50]) return redis.call('GET', KEYS[1])"
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			h := New()
			for i := range 50 {
				arg := strconv.Itoa(g*1000 + i)
				got, err := h.Eval(context.Background(), src, []string{"k"}, []string{arg})
				if err != nil || got != arg+"50" {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a host answered wrong: %v", err)
	}
}
