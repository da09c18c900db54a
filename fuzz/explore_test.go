package fuzz

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestExplore(t *testing.T) {
	s := startServers(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	seen := map[string]bool{}
	fails := func(tr []command) []mismatch {
		diffs, _, err := s.run(ctx, append(append([]command{}, tr...), epilogue...))
		if err != nil {
			t.Fatal(err)
		}
		return diffs
	}
	for i := 0; i < 30000; i++ {
		data := make([]byte, r.IntN(150))
		for j := range data {
			data[j] = byte(r.IntN(256))
		}
		tr := decodeTrace(data)
		if len(fails(tr)) == 0 {
			continue
		}
		for chunk := len(tr) / 2; chunk >= 1; chunk /= 2 {
			for start := 0; start+chunk <= len(tr); {
				cand := append(append([]command{}, tr[:start]...), tr[start+chunk:]...)
				if len(fails(cand)) > 0 {
					tr = cand
				} else {
					start += chunk
				}
			}
		}
		d := fails(tr)[0]
		k := fmt.Sprint(tr)
		if seen[k] {
			continue
		}
		seen[k] = true
		t.Logf("%s  %v\n   redis: %s\n   got:   %s", d.server, tr, d.want, d.got)
	}
}
