package luahost

import (
	"context"
	"fmt"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// TestConstructorsSized holds sizeConstructors to every table constructor's array count
// (the sizes of a chunk's NEWTABLEs, in order, nested functions after their parent) and
// checks that the tables still hold what they should.
func TestConstructorsSized(t *testing.T) {
	items := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprint(i + 1)
		}
		return strings.Join(s, ", ")
	}
	for _, c := range []struct {
		src   string
		sizes []int
		reply string // the reply's text, as fmt prints it
	}{
		{"return {1, 2, 3}", []int{3}, "[1 2 3]"},
		{"return {}", []int{0}, "[]"},
		{"local t = {a = 1} return {t.a}", []int{0, 1}, "[1]"},
		{"return {" + items(19) + "}", []int{19}, fmt.Sprint(seq(19))},
		{"return {" + items(60) + "}", []int{60}, fmt.Sprint(seq(60))},
		{"local function f() return 7, 8 end return {1, f()}", []int{1}, "[1 7 8]"},
		{"return {1, {2, 3, 4}, 5}", []int{3, 3}, "[1 [2 3 4] 5]"},
		{"local x = ARGV[1] == 'y' local t = x and {} or {1, 2} return t", []int{0, 2}, "[1 2]"},
		{"local function f() return {" + items(17) + "} end return f()", []int{17}, fmt.Sprint(seq(17))},
		{"local n = 0 for i = 1, 3 do local t = {i, i} n = n + #t end return {n}", []int{2, 1}, "[6]"},
	} {
		p, err := compileChunk(c.src, "t")
		if err != nil {
			t.Fatalf("%.40s: %v", c.src, err)
		}
		if got := newTableSizes(p); fmt.Sprint(got) != fmt.Sprint(c.sizes) {
			t.Errorf("%.60s: NEWTABLE sizes %v, want %v", c.src, got, c.sizes)
		}
		r, err := New().Eval(context.Background(), c.src, nil, []string{"n"})
		if err != nil {
			t.Fatalf("%.40s: %v", c.src, err)
		}
		if got := fmt.Sprint(r); got != c.reply {
			t.Errorf("%.60s: reply %s, want %s", c.src, got, c.reply)
		}
	}
	// A constructor of more than 511 * 50 items has SETLIST blocks in an extra code word
	// (which the compiler leaves 0); its size does not fit NEWTABLE's field and stays the
	// compiler's. Redis answers 26000 and 26000.
	src := "local t = {" + strings.Repeat("1, ", 25999) + "26000} return {#t, t[26000]}"
	r, err := New().Eval(context.Background(), src, nil, nil)
	if fmt.Sprint(r) != "[26000 26000]" || err != nil {
		t.Errorf("26,000 items: %v, %v", r, err)
	}
}

func seq(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i + 1)
	}
	return s
}

// newTableSizes lists the array size of every NEWTABLE of p, then of its functions'.
func newTableSizes(p *lua.FunctionProto) []int {
	sizes := []int{}
	for pc := 0; pc < len(p.Code); pc++ {
		inst := p.Code[pc]
		switch int(inst >> 26) {
		case lua.OP_NEWTABLE:
			sizes = append(sizes, argB(inst))
		case lua.OP_SETLIST:
			if argC(inst) == 0 {
				pc++
			}
		}
	}
	for _, f := range p.FunctionPrototypes {
		sizes = append(sizes, newTableSizes(f)...)
	}
	return sizes
}
