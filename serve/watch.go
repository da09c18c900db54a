package serve

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the policy files must stay unchanged before Watch reloads them, so an
// editor's save (write, rename, chmod) or a deployment copying several files is one reload.
const settle = 250 * time.Millisecond

// Watch reloads the policies whenever one of the server's paths changes, until ctx ends. A
// file is watched through its directory, so a file replaced by a rename (editors,
// Kubernetes ConfigMap updates) is still seen; so is any other change in that directory.
// Each reload is Reload's: a bad edit, a file caught mid-write, one emptied, or one that
// drops a policy without Config.AllowRemoval keeps the running policies, and the next
// change is read again; a watcher error is logged. Watch returns once every path is watched (a change from then on is seen), or
// with the error that keeps a path from being watched; done is closed when watching has
// stopped, after ctx ends.
func (s *Server) Watch(ctx context.Context) (done <-chan struct{}, err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	dirs := map[string]bool{}
	for _, p := range s.paths {
		dir := p
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			dir = filepath.Dir(p)
		}
		if !dirs[dir] {
			if err := w.Add(dir); err != nil {
				w.Close()
				return nil, err
			}
			dirs[dir] = true
		}
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer w.Close()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case err := <-w.Errors:
				s.log.Warn("rlctl serve: watching the policy files", "error", err.Error())
			case <-w.Events:
				// Any change in a watched directory: a ConfigMap swaps a "..data" link, not
				// the file; a reload that finds nothing new changes nothing.
				timer.Reset(settle)
			case <-timer.C:
				_, _ = s.Reload()
			}
		}
	}()
	return stopped, nil
}
