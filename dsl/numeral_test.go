package dsl

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestHugeNumeral holds hugeNumeral to its definition, ParseFloat's range error on the
// trimmed text, for decimal numerals (as HCL reads numbers) in and out of range and texts
// that only look like them.
func TestHugeNumeral(t *testing.T) {
	texts := []string{"", "1e400", "-1e400", " 1e400", "\u00a01e400", "\u20021e400\t", "+1E999", ".5e999",
		"1e-400", "1e308", "inf", "-Inf", "NaN", "/login", "POST", "user5", "e999", "1_0e999",
		strings.Repeat("9", 400), "-" + strings.Repeat("9", 400), "x" + strings.Repeat("9", 400), "1e40O"}
	r := rand.New(rand.NewPCG(3, 5))
	const alphabet = "0123456789eE+-._ \t\u00a0aZ/"
	for range 3000 {
		b := make([]rune, r.IntN(12))
		for i := range b {
			b[i] = []rune(alphabet)[r.IntN(len([]rune(alphabet)))]
		}
		texts = append(texts, string(b), "1e"+string(b), string(b)+"e999")
	}
	for _, s := range texts {
		_, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		want := errors.Is(err, strconv.ErrRange)
		if got := hugeNumeral(s); got != want {
			t.Errorf("hugeNumeral(%q) = %t, want %t", s, got, want)
		}
	}
}
