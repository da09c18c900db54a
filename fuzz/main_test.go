package fuzz

import (
	"os"
	"testing"

	"github.com/rlctl/rlctl/internal/redistest"
)

// TestMain stops, when the tests end, any redis-server FuzzCommands started that its
// cleanup did not (one per fuzzing worker process).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
