package listen

import (
	"context"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the watched files must stay unchanged before Watch calls reload,
// so that a rotation writing a certificate and then its key is one reload, of both.
const settle = 250 * time.Millisecond

// Watch calls reload whenever a file in the directory of one of paths changes, once
// the directory has been quiet for a moment, until ctx ends. A file is watched through
// its directory, so one replaced by a rename (editors, Kubernetes Secret updates) is
// still seen. Watch returns once every directory is watched, or with the error that
// keeps one from being watched; watcher errors go to failed, when not nil.
func Watch(ctx context.Context, paths []string, reload func(), failed func(error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, p := range paths {
		dir := filepath.Dir(p)
		if dirs[dir] {
			continue
		}
		if err := w.Add(dir); err != nil {
			w.Close()
			return err
		}
		dirs[dir] = true
	}
	go func() {
		defer w.Close()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case err := <-w.Errors:
				if failed != nil {
					failed(err)
				}
			case <-w.Events:
				timer.Reset(settle)
			case <-timer.C:
				reload()
			}
		}
	}()
	return nil
}
