package main

import (
	"syscall"
	"testing"
)

// TestDefaultMaxConns: -max-conns's default leaves fdReserve files of the open-file
// limit to all but the gRPC and HTTP listeners' connections.
func TestDefaultMaxConns(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	got := defaultMaxConns()
	switch {
	case got < 64:
		t.Errorf("defaultMaxConns() = %d, want at least 64", got)
	case rl.Cur >= fdReserve+128 && rl.Cur <= 1<<21 && uint64(2*got+fdReserve) > rl.Cur:
		t.Errorf("defaultMaxConns() = %d: two listeners' and %d more pass the limit %d", got, fdReserve, rl.Cur)
	}
	if rl.Cur == 1024 && got != 376 {
		t.Errorf("defaultMaxConns() = %d at 1024 files, want the documented 376", got)
	}
}
