package verify

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

// The ported limiters (../testdata/plugins/ported/NAME) are public limiters' rate-limiting
// logic re-implemented in the plugin contract, each with a SOURCE.md that names where it
// comes from (repository, files, commit, licence) and says what verify finds in it, and
// why: upstream bugs, and findings that are not (the port's plumbing, a documented choice).
// The findings block of SOURCE.md lists every result verify gives in its default mode:
//
//	<!-- findings -->
//	rule limit warn
//	policy atomicity fail
//	<!-- end of findings -->
//
// This test holds verify to that list: a change to verify that finds more or less in real
// code shows here, and SOURCE.md must then say why.
func TestPortedFindings(t *testing.T) {
	if raceEnabled {
		t.Skip("the ported limiters run verify's default budget, too slow under the race detector; they run in the non-race stage")
	}
	dirs, err := filepath.Glob(filepath.Join(catalogueDir, "ported", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("%d ported limiters, want at least 3", len(dirs))
	}
	block := regexp.MustCompile(`(?s)<!-- findings -->\n(.*?)<!-- end of findings -->`)
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join(dir, "SOURCE.md"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Repository: https://github.com/", "Commit: `", "Licence: "} {
				if !strings.Contains(string(src), want) {
					t.Errorf("SOURCE.md does not say %q", want)
				}
			}
			m := block.FindSubmatch(src)
			if m == nil {
				t.Fatal("SOURCE.md has no <!-- findings --> block")
			}
			want := strings.Fields(strings.ReplaceAll(string(m[1]), "\n", " | "))
			cfg, diags := dsl.Load(filepath.Join(dir, name+".hcl"))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			f, err := Check(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range f.Results {
				scope := "rule"
				if r.Rule == "" {
					scope = "policy"
				}
				got = append(got, scope, strings.ReplaceAll(r.Property, " ", "_"), strings.ToLower(r.Status.String()), "|")
			}
			if !slices.Equal(got, want) {
				var b strings.Builder
				for _, r := range f.Results {
					scope := "rule"
					if r.Rule == "" {
						scope = "policy"
					}
					b.WriteString(scope + " " + strings.ReplaceAll(r.Property, " ", "_") + " " + strings.ToLower(r.Status.String()) + "\n")
				}
				t.Errorf("verify's findings are not SOURCE.md's; what verify finds now:\n%s", b.String())
			}
		})
	}
}
