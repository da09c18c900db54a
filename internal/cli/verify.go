package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rlctl/rlctl/verify"
)

// Duration parses verify's -duration: a positive Go duration such as 10m or 90s. The
// error quotes s and says what is wanted.
func Duration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: want a positive duration such as 10m or 90s", strconv.Quote(s))
	}
	return d, nil
}

// Verdict says why verify fails, "" when it passes: the properties that failed and, when
// strict (-strict), the warnings, named as warnings: "1 property failed and 4 warnings
// (-strict)".
func Verdict(fails, warns int, strict bool) string {
	var parts []string
	if fails > 0 {
		parts = append(parts, fmt.Sprintf("%d %s failed", fails, Plural(fails, "property", "properties")))
	}
	if strict && warns > 0 {
		parts = append(parts, fmt.Sprintf("%d %s (-strict)", warns, Plural(warns, "warning", "warnings")))
	}
	return strings.Join(parts, " and ")
}

// StrictHint is the hint rlctl verify -strict prints when warnings fail it.
const StrictHint = "a warning is traffic within the bound an algorithm declares by design; accept_bound = true on the rule accepts that bound, and verify reports it as a note"

// ErrorFindings is the findings of a verify that could not run at all (verify.Check
// returned err) with seed and budget: the same schema, no results, and Error saying why,
// so a reader of the JSON gets an object either way.
func ErrorFindings(seed int64, budget int, err error) *verify.Findings {
	return &verify.Findings{Schema: verify.Schema, Seed: seed, Budget: budget, Results: []verify.Result{}, Error: err.Error()}
}
