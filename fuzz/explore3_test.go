package fuzz

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
	"strconv"
	"strings"
)

func TestExploreSlow(t *testing.T) {
	s := startServers(t)
	ctx := context.Background()
	files, _ := filepath.Glob(os.Getenv("HOME") + "/.cache/go-build/fuzz/github.com/rlctl/rlctl/fuzz/FuzzCommands/*")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		q := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		data, err := strconv.Unquote(q)
		if err != nil { t.Fatal(err) }
		start := time.Now()
		tr := append(decodeTrace([]byte(data)), epilogue...)
		if _, _, err := s.run(ctx, tr); err != nil { t.Fatal(err) }
		if d := time.Since(start); d > 20*time.Millisecond { t.Logf("%v %v", d, tr[:len(tr)-len(epilogue)]) }
	}
}
