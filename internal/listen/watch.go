package listen

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the watched files must stay unchanged before Watch calls reload,
// so that an editor's save (write, rename, chmod), a deployment copying several files or
// a rotation writing a certificate and then its key is one reload.
const settle = 250 * time.Millisecond

// Watch calls reload whenever a file changes in one of paths' directories (a path that is
// a directory is watched itself, a file through the directory holding it), once the
// directories have been quiet for a moment, until ctx ends. A file is watched through its
// directory, so one replaced by a rename (editors, Kubernetes ConfigMap and Secret
// updates, which swap a "..data" link) is still seen. Watch returns once every directory
// is watched, or with the error that keeps one from being watched; watcher errors go to
// failed, when not nil; done is closed when watching has stopped, after ctx ends.
func Watch(ctx context.Context, paths []string, reload func(), failed func(error)) (done <-chan struct{}, err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	dirs := map[string]bool{}
	for _, p := range paths {
		dir := p
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			dir = filepath.Dir(p)
		}
		if dirs[dir] {
			continue
		}
		if err := w.Add(dir); err != nil {
			w.Close()
			return nil, err
		}
		dirs[dir] = true
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
				if failed != nil {
					failed(err)
				}
			case <-w.Events:
				timer.Reset(settle)
			case <-timer.C:
				if ctx.Err() != nil {
					return // ended while the reload was due
				}
				reload()
			}
		}
	}()
	return stopped, nil
}
