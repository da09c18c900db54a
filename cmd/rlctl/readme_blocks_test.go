package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadmeSessions holds README.md's sessions (a block of "$ rlctl ..." lines and what
// they print) to what rlctl prints, run from the repository's root or, for a block marked
// <!-- variant: FILE.txtar -->, from the files of that archive, as the docs pages are.
func TestReadmeSessions(t *testing.T) {
	if raceEnabled {
		t.Skip("runs verify and simulate at their default budgets; checked without the race detector (make proofs)")
	}
	doc, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var sessions []docBlock
	for _, b := range fencedBlocks(t, "README.md", string(doc)) {
		if b.session() {
			sessions = append(sessions, b)
		}
	}
	if len(sessions) < 5 {
		t.Fatalf("only %d sessions in README.md", len(sessions))
	}
	checkBlocks(t, abs, "README.md", sessions)
}
