package fuzz

import (
	"context"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestExploreStats(t *testing.T) {
	s := startServers(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 2))
	total, skipped := 0, 0
	forms := map[string]int{}
	re := regexp.MustCompile(`\(not compared: ([^)]*)\)`)
	for i := 0; i < 3000; i++ {
		data := make([]byte, r.IntN(150))
		for j := range data {
			data[j] = byte(r.IntN(256))
		}
		tr := decodeTrace(data)
		_, listing, err := s.run(ctx, tr)
		if err != nil {
			t.Fatal(err)
		}
		total += len(tr)
		skipped += strings.Count(listing, "(not compared")
		for _, m := range re.FindAllStringSubmatch(listing, -1) {
			forms[m[1]]++
		}
	}
	t.Logf("total %d, not compared on miniredis %d", total, skipped)
	for k, v := range forms {
		t.Logf("%6d %s", v, k)
	}
}
