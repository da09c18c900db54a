package main

import (
	"bytes"
	"errors"
	"flag"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestUsageLines: each command's usage line names exactly the flags its flag set defines,
// and the package documentation (go doc) lists every command with that usage line.
func TestUsageLines(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var doc, want []string
	for _, l := range strings.Split(f.Doc.Text(), "\n") {
		if strings.HasPrefix(l, "\trlctl ") {
			doc = append(doc, strings.TrimSpace(l))
		}
	}
	named := regexp.MustCompile(`(?:^|[\[ ])-([A-Za-z0-9]+(?:-[A-Za-z0-9]+)*)`)
	for _, c := range commands {
		want = append(want, strings.TrimSpace("rlctl "+c.name+" "+c.args))
		var fs *flag.FlagSet
		flagsMade = func(s *flag.FlagSet) { fs = s }
		var out bytes.Buffer
		err := c.run(&env{stdout: &out, stderr: &out}, []string{"-h"})
		flagsMade = nil
		if !errors.Is(err, errHelp) || fs == nil {
			t.Errorf("rlctl %s -h: %v, want its help from its flag set", c.name, err)
			continue
		}
		var defined, listed []string
		fs.VisitAll(func(f *flag.Flag) { defined = append(defined, f.Name) })
		for _, m := range named.FindAllStringSubmatch(c.args, -1) {
			listed = append(listed, m[1])
		}
		slices.Sort(defined)
		slices.Sort(listed)
		if !slices.Equal(defined, listed) {
			t.Errorf("rlctl %s: the usage line %q names the flags %q; the command defines %q", c.name, c.args, listed, defined)
		}
	}
	if !slices.Equal(doc, want) {
		t.Errorf("the package documentation lists\n\t%s\nwant\n\t%s", strings.Join(doc, "\n\t"), strings.Join(want, "\n\t"))
	}
}
