package dsl

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/rlctl/rlctl/calendar"
	"github.com/zclconf/go-cty/cty"
)

// calendarWindow decodes a rule's calendar: window = "calendar_day", "calendar_week"
// (from Monday; "calendar_week_sunday" and the like from another day), "calendar_month"
// or "calendar_year", with time_zone = "<IANA name>" (default UTC). It sets r.Calendar
// and reports whether the window attribute was a calendar period (decoded here, not as a
// duration). A calendar is for fixed_window only.
func (l *loader) calendarWindow(r *Rule, content *hcl.BodyContent) bool {
	w, tz := content.Attributes["window"], content.Attributes["time_zone"]
	name, isCal := "", false
	if w != nil {
		if lit, ok := w.Expr.(*hclsyntax.TemplateExpr); ok && lit.IsStringLiteral() {
			v, _ := lit.Value(nil)
			name, isCal = v.AsString(), strings.HasPrefix(v.AsString(), "calendar_")
		} else if v, d := w.Expr.Value(nil); !d.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type() == cty.String {
			name, isCal = v.AsString(), strings.HasPrefix(v.AsString(), "calendar_")
		}
	}
	if !isCal {
		if tz != nil {
			l.add(errorf(tz.NameRange, "time_zone without a calendar window", "time_zone says where a calendar period's days begin, so it needs window = \"calendar_day\", \"calendar_week\", \"calendar_month\" or \"calendar_year\" on a fixed_window rule; a window written as a duration (\"1h\") is the same everywhere. Remove time_zone, or give the rule a calendar window."))
		}
		return false
	}
	if !r.Algorithm.Calendared() {
		l.add(errorf(w.Expr.Range(), "Calendar window on "+r.Algorithm.Name, "Rule %q uses %s; calendar periods (%s) are windows of fixed_window, the quota a plan sells (\"10000 a month\"): write algorithm = \"fixed_window\", or give %s a duration, such as window = \"1h\".", r.Name, r.Algorithm.Name, name, r.Algorithm.Name))
		return true
	}
	zone := ""
	if tz != nil {
		s, ok := l.constString(tz)
		if !ok {
			return true
		}
		if _, err := calendar.Zone(s); err != nil {
			l.add(errorf(tz.Expr.Range(), "Unknown time zone", "%s.", err.Error()))
			return true
		}
		zone = s
	}
	p, err := calendar.Parse(name, zone)
	if err != nil {
		l.add(errorf(w.Expr.Range(), "Invalid calendar window", "%s.", err.Error()))
		return true
	}
	r.Calendar = &p
	if content.Attributes["accept_bound"] == nil {
		// A quota that starts afresh each period is what a calendar window sells: the
		// limit at a period's end and again at the next one's start is its promise, not
		// a flaw, so verify notes it unless accept_bound = false says otherwise.
		r.AcceptBound = true
	}
	return true
}

// Describe is the rule's limit in words for wire parameters w, as rlctl shows it
// (algorithms.Algorithm.Describe): a calendar rule's as "10000 per calendar_month
// (America/New_York)".
func (r *Rule) Describe(w []int64) string {
	if r.Calendar != nil && len(w) > 0 {
		return fmt.Sprintf("%d per %s", w[0], r.Calendar)
	}
	return r.Algorithm.Describe(w)
}
