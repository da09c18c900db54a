package dsl

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Every topic is embedded, points at its full reference, and fits a terminal.
func TestTopics(t *testing.T) {
	topics := Topics()
	if len(topics) != 3 {
		t.Fatalf("%d topics, want policy, scenario and plugins", len(topics))
	}
	for _, tp := range topics {
		if tp.Short == "" || !strings.Contains(tp.Text, "See docs/") {
			t.Errorf("topic %s: short %q; its text does not point at its page in docs/", tp.Name, tp.Short)
		}
		for i, line := range strings.Split(tp.Text, "\n") {
			if n := utf8.RuneCountInString(line); n > 88 {
				t.Errorf("%s line %d is %d columns wide, more than 88: %s", tp.Name, i+1, n, line)
			}
		}
	}
}
