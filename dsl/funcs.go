package dsl

import (
	"net/netip"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// policyFunctions is the function table of policy expressions and locals: HCL's usual
// standard library (go-cty's stdlib, under the names Terraform made familiar) plus a few
// of ours for matching requests; lower, upper and title are ours too, so that invalid
// UTF-8 survives them. Nothing here reads the clock, the environment or random numbers,
// so a constant expression folds to the same value every time.
var policyFunctions = sync.OnceValue(func() map[string]function.Function {
	return map[string]function.Function{
		// strings
		"lower":        lowerFunc,
		"upper":        upperFunc,
		"title":        titleFunc,
		"trimspace":    stdlib.TrimSpaceFunc,
		"trim":         stdlib.TrimFunc,
		"trimprefix":   stdlib.TrimPrefixFunc,
		"trimsuffix":   stdlib.TrimSuffixFunc,
		"chomp":        stdlib.ChompFunc,
		"substr":       stdlib.SubstrFunc,
		"strlen":       stdlib.StrlenFunc,
		"strrev":       stdlib.ReverseFunc,
		"join":         stdlib.JoinFunc,
		"split":        stdlib.SplitFunc,
		"replace":      stdlib.ReplaceFunc,
		"format":       stdlib.FormatFunc,
		"formatlist":   stdlib.FormatListFunc,
		"regex":        stdlib.RegexFunc,
		"regexall":     stdlib.RegexAllFunc,
		"regexreplace": stdlib.RegexReplaceFunc,
		"startswith":   startsWithFunc,
		"endswith":     endsWithFunc,
		"strcontains":  strContainsFunc,
		"glob":         globFunc,
		"cidrcontains": cidrContainsFunc,
		// numbers
		"abs":      stdlib.AbsoluteFunc,
		"ceil":     stdlib.CeilFunc,
		"floor":    stdlib.FloorFunc,
		"log":      stdlib.LogFunc,
		"max":      stdlib.MaxFunc,
		"min":      stdlib.MinFunc,
		"pow":      stdlib.PowFunc,
		"signum":   stdlib.SignumFunc,
		"parseint": stdlib.ParseIntFunc,
		// collections
		"coalesce":     stdlib.CoalesceFunc,
		"coalescelist": stdlib.CoalesceListFunc,
		"concat":       stdlib.ConcatFunc,
		"contains":     stdlib.ContainsFunc,
		"distinct":     stdlib.DistinctFunc,
		"element":      stdlib.ElementFunc,
		"flatten":      stdlib.FlattenFunc,
		"keys":         stdlib.KeysFunc,
		"length":       stdlib.LengthFunc,
		"lookup":       stdlib.LookupFunc,
		"merge":        stdlib.MergeFunc,
		"reverse":      stdlib.ReverseListFunc,
		"slice":        stdlib.SliceFunc,
		"sort":         stdlib.SortFunc,
		"values":       stdlib.ValuesFunc,
		"zipmap":       stdlib.ZipmapFunc,
		// conversions and encodings
		"tobool":     stdlib.MakeToFunc(cty.Bool),
		"tonumber":   stdlib.MakeToFunc(cty.Number),
		"tostring":   stdlib.MakeToFunc(cty.String),
		"tolist":     stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":      stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"toset":      stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"jsonencode": stdlib.JSONEncodeFunc,
		"jsondecode": stdlib.JSONDecodeFunc,
		// errors
		"try": tryfunc.TryFunc,
		"can": tryfunc.CanFunc,
	}
})

// stringPredicate makes a function of two strings returning a bool.
func stringPredicate(a, b string, f func(s, t string) bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{
			{Name: a, Type: cty.String},
			{Name: b, Type: cty.String},
		},
		Type:         function.StaticReturnType(cty.Bool),
		RefineResult: func(b *cty.RefinementBuilder) *cty.RefinementBuilder { return b.NotNull() },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

var (
	// startswith(str, prefix) reports whether str begins with prefix.
	startsWithFunc = stringPredicate("str", "prefix", strings.HasPrefix)
	// endswith(str, suffix) reports whether str ends with suffix.
	endsWithFunc = stringPredicate("str", "suffix", strings.HasSuffix)
	// strcontains(str, substr) reports whether substr is within str. (contains is the list
	// function, as in Terraform.)
	strContainsFunc = stringPredicate("str", "substr", strings.Contains)
	// glob(str, pattern) reports whether str matches pattern, in which each '*' matches
	// any run of characters (none included) and every other character itself.
	globFunc = stringPredicate("str", "pattern", Glob)
)

// Glob reports whether s matches pattern as the policy function glob(s, pattern) does:
// each '*' in pattern matches any run of characters, none included, and every other
// character itself. (It compares bytes; the policy function sees its arguments in NFC, as
// HCL gives every string.)
//
// It holds when pattern split at its '*'s is a prefix of s, a suffix, and the parts
// between in order, not overlapping, in what lies between. Taking each middle part at its first place is as good as any: a later one leaves less
// room for the rest.
func Glob(s, pattern string) bool {
	first, rest, wild := strings.Cut(pattern, "*")
	if !wild {
		return s == pattern
	}
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	i := strings.LastIndexByte(rest, '*')
	last := rest[i+1:]
	if !strings.HasSuffix(s, last) {
		return false
	}
	s = s[:len(s)-len(last)]
	if i < 0 {
		return true
	}
	for part := range strings.SplitSeq(rest[:i], "*") {
		j := strings.Index(s, part)
		if j < 0 {
			return false
		}
		s = s[j+len(part):]
	}
	return true
}

// cidrcontains(prefix, address) reports whether the IP address lies in the CIDR prefix. An
// address that is not an IP address is in no prefix (a request attribute is not trusted to
// be well-formed); a malformed prefix is an error, found at load time when it is constant.
var cidrContainsFunc = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "prefix", Type: cty.String},
		{Name: "address", Type: cty.String},
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		if p := args[0]; p.IsKnown() && !p.IsNull() {
			if _, err := netip.ParsePrefix(p.AsString()); err != nil {
				return cty.NilType, function.NewArgErrorf(0, "%q is not a CIDR prefix such as \"10.0.0.0/8\" or \"2001:db8::/32\"", p.AsString())
			}
		}
		return cty.Bool, nil
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p, err := netip.ParsePrefix(args[0].AsString())
		if err != nil {
			return cty.NilVal, function.NewArgErrorf(0, "%q is not a CIDR prefix such as \"10.0.0.0/8\" or \"2001:db8::/32\"", args[0].AsString())
		}
		a, err := netip.ParseAddr(args[1].AsString())
		if err != nil {
			return cty.False, nil
		}
		return cty.BoolVal(p.Contains(a.Unmap())), nil
	},
})

// caseFunc makes a function of one string that maps each of its runes with to; a byte that
// is not part of valid UTF-8 is kept as it is (to sees it as utf8.RuneError). go-cty's
// lower, upper and title turn every such byte into U+FFFD, which would give request values
// that differ only there one key.
func caseFunc(desc string, to func(rune) rune) function.Function {
	return function.New(&function.Spec{
		Description:  desc,
		Params:       []function.Parameter{{Name: "str", Type: cty.String, AllowDynamicType: true}},
		Type:         function.StaticReturnType(cty.String),
		RefineResult: func(b *cty.RefinementBuilder) *cty.RefinementBuilder { return b.NotNull() },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.StringVal(mapRunes(args[0].AsString(), to)), nil
		},
	})
}

// mapRunes is strings.Map(to, s) except that invalid UTF-8 bytes are copied, not replaced.
func mapRunes(s string, to func(rune) rune) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		m := to(r)
		if r == utf8.RuneError && n == 1 {
			b.WriteByte(s[i])
		} else {
			b.WriteRune(m)
		}
		i += n
	}
	return b.String()
}

var (
	// lower(str) maps every letter of str to lower case, as strings.ToLower does.
	lowerFunc = caseFunc("Returns the given string with all Unicode letters translated to their lowercase equivalents.", unicode.ToLower)
	// upper(str) maps every letter of str to upper case, as strings.ToUpper does.
	upperFunc = caseFunc("Returns the given string with all Unicode letters translated to their uppercase equivalents.", unicode.ToUpper)
)

// title(str) maps the first letter of each word of str to title case, with the word
// boundaries of strings.Title (what go-cty's title uses).
var titleFunc = function.New(&function.Spec{
	Description:  "Replaces one letter after each non-letter and non-digit character with its uppercase equivalent.",
	Params:       []function.Parameter{{Name: "str", Type: cty.String}},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: func(b *cty.RefinementBuilder) *cty.RefinementBuilder { return b.NotNull() },
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		prev := ' '
		return cty.StringVal(mapRunes(args[0].AsString(), func(r rune) rune {
			if isSeparator(prev) {
				prev = r
				return unicode.ToTitle(r)
			}
			prev = r
			return r
		})), nil
	},
})

// isSeparator reports whether r separates words, as strings.Title decides: anything but
// ASCII letters, digits and '_', other letters and digits, and (outside ASCII) spaces
// only.
func isSeparator(r rune) bool {
	if r <= 0x7F {
		return !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || r == '_')
	}
	if unicode.IsLetter(r) || unicode.IsDigit(r) {
		return false
	}
	return unicode.IsSpace(r)
}
