package dsl

import (
	"net/netip"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// policyFunctions is the function table of policy expressions and locals: HCL's usual
// standard library (go-cty's stdlib, under the names Terraform made familiar) plus a few
// of ours for matching requests. Nothing here reads the clock, the environment or random
// numbers, so a constant expression folds to the same value every time.
var policyFunctions = sync.OnceValue(func() map[string]function.Function {
	return map[string]function.Function{
		// strings
		"lower":        stdlib.LowerFunc,
		"upper":        stdlib.UpperFunc,
		"title":        stdlib.TitleFunc,
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
)

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
