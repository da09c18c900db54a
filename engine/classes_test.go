package engine

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the error classification table in RELIABILITY.md")

const (
	classesBegin = "<!-- classification: generated from engine.ReplyClasses by go test ./engine -run TestReliabilityQuotesTheClassification -update -->\n"
	classesEnd   = "<!-- end of classification -->\n"
)

// classesTable renders ReplyClasses, and the errors that are not replies, as markdown.
func classesTable() string {
	var b strings.Builder
	b.WriteString("| error | class | what it means | what the engine does |\n|---|---|---|---|\n")
	does := map[Class]string{
		ClassBackend: "on_error decides; counts towards the breaker",
		ClassScript:  "on_error decides; logged at error level; the backend counts as healthy",
		ClassCaller:  "returned to the caller",
	}
	remedies := map[remedy]string{
		reload: "the backend loads the script, one load per server at a time that the other callers missing it wait for within their deadline, and calls again; then on_error decides; never counts towards the breaker",
		resend: "on a Redis Cluster the engine refreshes the slot map and sends the call once more, to the slot's owner; then on_error decides; counts towards the breaker",
	}
	refreshes := "; on a Redis Cluster it refreshes the slot map (at most every " + slotRefreshEvery.String() + "), and never resends the call"
	row := func(err string, c Class, meaning string, r remedy) {
		d := does[c]
		switch {
		case r != noRemedy:
			d = remedies[r]
		case err == "breaker open (`engine.ErrBreakerOpen`)":
			d = "on_error decides; the breaker's probe, after the cooldown, asks the backend again; on a Redis Cluster it refreshes the slot map (at most every " +
				slotRefreshEvery.String() + "), so that a slot a failover moved is asked at its new owner, through that owner's breaker"
		case strings.HasPrefix(err, "the deadline ended while"):
			d = "on_error decides; never counts towards the breaker"
		case strings.HasPrefix(err, "network error"):
			d += refreshes
		}
		b.WriteString("| " + err + " | " + c.String() + " | " + meaning + " | " + d + " |\n")
	}
	for _, r := range ReplyClasses {
		row("`"+r.Prefix+" …`", r.Class, r.Meaning, r.remedy)
	}
	row("any other error reply", ClassBackend, "a server state this table does not know", noRemedy)
	row("a reply that does not decode", ClassScript, "the script and the engine disagree on the reply's shape", noRemedy)
	row("network error, closed connection, client timeout, pool timeout, the engine's deadline", ClassBackend, "the server cannot be reached in time", noRemedy)
	row("breaker open (`engine.ErrBreakerOpen`)", ClassBackend, "recent calls failed; the backend was not asked", noRemedy)
	row("the deadline ended while the call waited for a load of the script that another call started", ClassBackend, "the server was loading the script", noRemedy)
	row("`engine.ErrRequest`", ClassCaller, "a policy expression failed on the request, or a negative or overflowing cost", noRemedy)
	row("the caller's context cancelled or past its deadline", ClassCaller, "the caller stopped waiting; its call may still be charged, as a request that arrived", noRemedy)
	return b.String()
}

// TestReliabilityQuotesTheClassification: RELIABILITY.md's classification table is the one
// the engine uses.
func TestReliabilityQuotesTheClassification(t *testing.T) {
	const path = "../RELIABILITY.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, classesBegin), strings.Index(doc, classesEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no classification markers:\n%s%s", path, classesBegin, classesEnd)
	}
	want := doc[:i+len(classesBegin)] + classesTable() + doc[j:]
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's classification table differs from engine.ReplyClasses; run go test ./engine -run TestReliabilityQuotesTheClassification -update", path)
}

// TestReadmeQuotesTheReliabilityPromises: README.md states the engine's reliability promises
// in the words of RELIABILITY.md.
func TestReadmeQuotesTheReliabilityPromises(t *testing.T) {
	rel, err := os.ReadFile("../RELIABILITY.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- promises -->\n", "<!-- end of promises -->\n"
	quote := func(name string, doc []byte) string {
		s := string(doc)
		i, j := strings.Index(s, begin), strings.Index(s, end)
		if i < 0 || j < i {
			t.Fatalf("%s has no promise markers %q … %q", name, begin, end)
		}
		return s[i+len(begin) : j]
	}
	if r, m := quote("README.md", readme), quote("RELIABILITY.md", rel); r != m {
		t.Errorf("README.md's reliability promises differ from RELIABILITY.md's:\n--- README.md\n%s--- RELIABILITY.md\n%s", r, m)
	}
}
