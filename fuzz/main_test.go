package fuzz

import (
	"os"
	"testing"

	"github.com/rlctl/rlctl/internal/redistest"
)

// TestMain stops the redis-server FuzzCommands starts (one per fuzzing worker process).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
