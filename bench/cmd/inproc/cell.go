package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// sink is a ResponseWriter that keeps nothing (as httplimit's BenchmarkMiddleware's), but
// counts the responses that were not 200: a cell fails when its contender refused one.
type sink struct {
	h       http.Header
	refused int
}

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) Write(b []byte) (int, error) { return len(b), nil }
func (s *sink) WriteHeader(code int) {
	if code != http.StatusOK {
		s.refused++
	}
}

// load is what every cell is bounded by, and its shape.
type load struct {
	n      int // timed requests per cell, between all goroutines
	c      int // goroutines
	allocN int // requests of the single-goroutine allocation count
	addrs  []string
}

// cell is one measurement of one contender.
type cell struct {
	elapsed time.Duration // wall time of the n timed requests
	cpu     time.Duration // the process's CPU time (user + system) over them
	n       int
	allocs  float64 // per request, one goroutine
	bytes   float64 // per request, one goroutine
}

func (c *cell) ns() float64    { return float64(c.elapsed.Nanoseconds()) / float64(c.n) }
func (c *cell) cpuNS() float64 { return float64(c.cpu.Nanoseconds()) / float64(c.n) }

// addresses returns n client addresses, "10.a.b.c:port", all different.
func addresses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.%d.%d.%d:%d", i>>16&0xff, i>>8&0xff, i&0xff, 40000+i%20000)
	}
	return out
}

// worker sends requests through h with a request and a sink of its own, cycling over
// addrs from an offset.
type worker struct {
	h    http.Handler
	req  *http.Request
	w    *sink
	addr []string
	next int
}

func newWorker(h http.Handler, addrs []string, offset int) *worker {
	return &worker{h: h, req: httptest.NewRequest("GET", "/v1/items", nil), w: &sink{h: http.Header{}},
		addr: addrs, next: offset % len(addrs)}
}

func (w *worker) serve(n int) {
	for range n {
		w.req.RemoteAddr = w.addr[w.next]
		if w.next++; w.next == len(w.addr) {
			w.next = 0
		}
		clear(w.w.h)
		w.h.ServeHTTP(w.w, w.req)
	}
}

// runCell builds c's contender anew and measures it: a warm-up of two requests from every
// address, the allocations of allocN requests from one goroutine, then (after a GC) the
// time of n requests from l.c goroutines. Any refused request is an error.
func runCell(c contender, l load) (*cell, error) {
	h, err := c.build(ok, false)
	if err != nil {
		return nil, err
	}
	one := newWorker(h, l.addrs, 0)
	one.serve(2 * len(l.addrs))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	one.serve(l.allocN)
	runtime.ReadMemStats(&after)
	out := &cell{n: l.n,
		allocs: float64(after.Mallocs-before.Mallocs) / float64(l.allocN),
		bytes:  float64(after.TotalAlloc-before.TotalAlloc) / float64(l.allocN)}

	ws := make([]*worker, l.c)
	for i := range ws {
		ws[i] = newWorker(h, l.addrs, i*len(l.addrs)/l.c)
	}
	runtime.GC()
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i, w := range ws {
		n := l.n / l.c
		if i < l.n%l.c {
			n++
		}
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			w.serve(n)
		}()
	}
	ready.Wait()
	cpu0, t0 := selfCPU(), time.Now()
	close(start)
	done.Wait()
	out.elapsed, out.cpu = time.Since(t0), selfCPU()-cpu0

	refused := one.w.refused
	for _, w := range ws {
		refused += w.w.refused
	}
	if refused > 0 {
		return nil, fmt.Errorf("%d requests refused: the limit is meant never to be reached", refused)
	}
	return out, nil
}

// selfCPU is this process's CPU time (user + system) so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
