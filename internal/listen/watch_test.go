package listen

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestWatch: a file replaced by a rename in a watched directory sets off a reload.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	writeFile(t, path, "a\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan struct{}, 16)
	done, err := Watch(ctx, []string{path}, func() { reloads <- struct{}{} }, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".tokens.new")
	writeFile(t, tmp, "b\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	<-reloads // the test's -timeout bounds it
	if _, err := Watch(ctx, []string{filepath.Join(dir, "no", "such")}, func() {}, nil); err == nil {
		t.Error("Watch of a missing directory: no error")
	}
	cancel()
	<-done // closed once watching has stopped
}
