package verify

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// This file runs Check's independent checks on several workers. A check (a task) is one
// rule's traces, its client clocks or its race of commands, or one of a policy's
// atomicity, race and race (cluster): each has its own random stream (checker.rng, keyed
// by what it checks), its own subject and hosts emptied before every trace, so what it
// finds does not depend on which worker runs it, or when. Results are merged in the
// order the checks are listed, which is the order a single worker runs them in.

// WithWorkers sets how many checks Check runs at once, each on hosts of its own
// (default runtime.GOMAXPROCS(0); n < 1 counts as 1), and how many goroutines a Simulate
// uses: its own, and n - 1 that run its probes beside it (see Simulate). Findings and
// reports are the same, byte for byte, whatever n is. With one worker, Check runs every
// check, and Simulate every probe, on its caller's goroutine.
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// workerCount is WithWorkers's n, or runtime.GOMAXPROCS(0) when none was given.
func (o *options) workerCount() int {
	if o.workers == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return o.workers
}

// CheckProgress is how far a Check has got.
type CheckProgress struct {
	Done, Total int   // checks finished, and in all
	Calls       int64 // script calls made so far
}

// WithCheckProgress makes Check call f with how far it has got: after every check and
// every progressCalls script calls, from whichever worker got there, and once at the end
// with every check done. Calls to f never overlap; a report that would overlap one under
// way is dropped, except the last.
func WithCheckProgress(f func(CheckProgress)) Option {
	return func(o *options) { o.checkProgress = f }
}

// progressCalls is how many script calls go by between progress reports.
const progressCalls = 256

// task is one check. do runs it on a worker's checker; it may wait for done of a task
// listed before it, which a worker has then already taken, as workers take tasks in
// order: the wait never deadlocks.
type task struct {
	do    func(c *checker) ([]Result, error)
	res   []Result
	err   error
	calls int
	done  chan struct{}
}

// group is the checks of one rule and parameter set, or of one policy, whose results
// are reported together: a failure to check any of them (an error, not a finding) makes
// the group one result, stopped's.
type group struct {
	tasks   []*task
	fixed   []Result // results known without checking
	stopped func(error) Result
	finish  func([]Result) // adjusts the group's results, when set
}

// results returns the group's results, once its tasks are done.
func (gr *group) results() []Result {
	out := gr.fixed
	for _, t := range gr.tasks {
		if t.err != nil {
			out = []Result{gr.stopped(t.err)}
			break
		}
		out = append(out, t.res...)
	}
	if gr.finish != nil {
		gr.finish(out)
	}
	return out
}

// runTasks runs the tasks of groups on the checker's workers and returns the script
// calls they made.
func (c *checker) runTasks(groups []*group) int {
	var tasks []*task
	for _, gr := range groups {
		tasks = append(tasks, gr.tasks...)
	}
	for _, t := range tasks {
		if t.done == nil {
			t.done = make(chan struct{})
		}
	}
	workers := max(1, min(c.o.workerCount(), len(tasks)))
	pr := &progress{f: c.o.checkProgress, total: len(tasks)}
	tick := pr.tick
	if pr.f == nil {
		tick = nil
	}
	// Hosts carry math.random's state from one script to the next: a worker reuses its
	// hosts from check to check only when no script can read that state, and otherwise
	// each check starts on hosts of its own.
	reuse := c.keysOnly
	var next atomic.Int64
	// work is worker w: it takes the next task until there are none.
	work := func(w int) {
		own := &checker{o: c.o, plan: c.plan, script: c.script, cfg: c.cfg, tick: tick, keysOnly: c.keysOnly}
		if w == 0 && reuse {
			own.harness = c.harness
			c.harness.tick = tick
		}
		for {
			i := int(next.Add(1)) - 1
			if i >= len(tasks) {
				return
			}
			t := tasks[i]
			own.calls = 0
			if !reuse {
				own.g, own.harness = nil, nil
			}
			t.res, t.err = t.do(own)
			t.calls = own.calls
			close(t.done)
			pr.finished()
		}
	}
	// One worker is the calling goroutine, so a panic reaches Check's caller.
	if workers == 1 {
		work(0)
	} else {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() { work(w) })
		}
		wg.Wait()
	}
	pr.final()
	calls := 0
	for _, t := range tasks {
		calls += t.calls
	}
	return calls
}

// progress reports a Check's progress to f.
type progress struct {
	f     func(CheckProgress)
	total int
	done  atomic.Int64
	calls atomic.Int64
	mu    sync.Mutex
}

// tick counts a script call, and reports every progressCalls.
func (pr *progress) tick() {
	if pr.calls.Add(1)%progressCalls == 0 {
		pr.report()
	}
}

// finished counts a finished check and reports.
func (pr *progress) finished() {
	pr.done.Add(1)
	pr.report()
}

// final reports the end, waiting for a report under way.
func (pr *progress) final() {
	if pr.f == nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.f(CheckProgress{Done: int(pr.done.Load()), Total: pr.total, Calls: pr.calls.Load()})
}

func (pr *progress) report() {
	if pr.f == nil || !pr.mu.TryLock() {
		return
	}
	defer pr.mu.Unlock()
	pr.f(CheckProgress{Done: int(pr.done.Load()), Total: pr.total, Calls: pr.calls.Load()})
}
