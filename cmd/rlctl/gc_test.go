package main

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// gcSettings reads the collector's GOGC and memory limit.
func gcSettings() (percent, limit int64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
}

// TestBatchGCHandsOver checks batchGC's two stages: no collection until the heap reaches
// batchGCStart, and GOGC=400 without a limit once the first collection has run.
func TestBatchGCHandsOver(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set: batchGC leaves the collector as they say")
	}
	percent, limit := gcSettings()
	defer debug.SetMemoryLimit(limit)
	defer debug.SetGCPercent(int(percent))

	handedOver := batchGC()
	if p, l := gcSettings(); p != -1 || l != batchGCStart { // GOGC off reads as -1
		t.Fatalf("before the first collection: GOGC %d, limit %d; want off and %d", p, l, batchGCStart)
	}
	runtime.GC()
	<-handedOver // the finalizer runs on the finalizer goroutine after the collection
	if p, l := gcSettings(); p != 400 || l != math.MaxInt64 {
		t.Fatalf("after the first collection: GOGC %d, limit %d; want 400 and none", p, l)
	}
}
