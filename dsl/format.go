package dsl

import (
	"bytes"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// Format returns the canonical form of a native-syntax policy file: hclwrite's layout
// (indentation, spacing, the = of consecutive attributes aligned in a column), with blank
// lines normalized: none at the start or end of the file or of a { } body, and never two
// in a row. Comments are kept. Format is idempotent, and its output parses to the same
// configuration. When src does not parse, Format returns no output and the syntax
// diagnostics: it never rewrites a file it does not understand.
func Format(filename string, src []byte) ([]byte, hcl.Diagnostics) {
	if _, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos); diags.HasErrors() {
		return nil, diags
	}
	out := src
	for range 4 {
		next := blankLines(hclwrite.Format(out), filename)
		if bytes.Equal(next, out) {
			break
		}
		out = next
	}
	if _, diags := hclsyntax.ParseConfig(out, filename, hcl.InitialPos); diags.HasErrors() {
		// A formatter bug: report it rather than write a broken file.
		return nil, hcl.Diagnostics{errorf(hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
			"Cannot format file", "Formatting this file would make it invalid (a bug in rlctl fmt); the file is left as it is.")}
	}
	return out, nil
}

// blankLines removes blank lines at the start and end of the file and of every { }, and
// collapses runs of blank lines into one. It works on tokens, so heredocs and comments are
// untouched.
func blankLines(src []byte, filename string) []byte {
	toks, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	endsLine := func(t hclsyntax.Token) bool {
		return t.Type == hclsyntax.TokenNewline || (t.Type == hclsyntax.TokenComment && bytes.HasSuffix(t.Bytes, []byte("\n")))
	}
	var kept []int // indexes into toks
	// blank reports whether the last kept token is a newline ending an empty line.
	blank := func() bool {
		n := len(kept)
		return n >= 2 && toks[kept[n-1]].Type == hclsyntax.TokenNewline && endsLine(toks[kept[n-2]])
	}
	var lastSignificant hclsyntax.TokenType
	for i, t := range toks {
		switch t.Type {
		case hclsyntax.TokenNewline:
			if len(kept) == 0 {
				continue // leading blank line
			}
			if endsLine(toks[kept[len(kept)-1]]) && (blank() || lastSignificant == hclsyntax.TokenOBrace) {
				continue // a second blank line, or one right after {
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenEOF:
			for blank() {
				kept = kept[:len(kept)-1]
			}
		}
		if t.Type != hclsyntax.TokenNewline {
			lastSignificant = t.Type
		}
		kept = append(kept, i)
	}
	var b bytes.Buffer
	b.Grow(len(src) + 1)
	for _, i := range kept {
		from := 0
		if i > 0 {
			from = toks[i-1].Range.End.Byte
		}
		b.Write(src[from:toks[i].Range.End.Byte])
	}
	out := bytes.TrimRight(b.Bytes(), " \t")
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return out
}
