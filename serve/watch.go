package serve

import (
	"context"

	"github.com/rlctl/rlctl/internal/listen"
)

// Watch reloads the policies whenever one of the server's paths changes, until ctx ends. A
// file is watched through its directory, so a file replaced by a rename (editors,
// Kubernetes ConfigMap updates) is still seen; so is any other change in that directory.
// The files must have stayed unchanged for a moment (250ms) before a reload, so an
// editor's save or a deployment copying several files is one reload. Each reload is
// Reload's: a bad edit keeps the running policies; a watcher error is logged. Watch
// returns once every path is watched (a change from then on is seen), or with the error
// that keeps a path from being watched; done is closed when watching has stopped, after
// ctx ends.
func (s *Server) Watch(ctx context.Context) (done <-chan struct{}, err error) {
	// Any change in a watched directory reloads: a ConfigMap swaps a "..data" link, not
	// the file; a reload that finds nothing new changes nothing.
	return listen.Watch(ctx, s.paths, func() { _, _ = s.Reload() }, func(err error) {
		s.log.Warn("rlctl serve: watching the policy files", "error", err.Error())
	})
}
