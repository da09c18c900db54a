package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDocsServeCurl replays the curl sessions of docs/serve.md against the service they
// talk to. A session is a block of "$ curl ..." lines (a line ending in " \" goes on to the
// next), each followed by what it prints; the sessions after a sh block's rlctl serve
// command (or go run ./cmd/rlctl serve) are replayed in order, through net/http, on one
// run of that command in process on loopback ports, localhost:8080 read as its HTTP API.
//
// An answer matches when it prints what is shown: with -i the status line and the headers
// (in the order the server writes them: by name, then Date and Content-Length), then the
// body. Three things may differ. Date's and Content-Length's values are not compared. A
// time (retry_after_ms, reset_after_ms, Retry-After, a RateLimit item's t) may be less than
// the one shown by the time the replay has taken so far: the answers shown are those of
// requests that take no time. An answer shown with "..." lines is an excerpt: its other
// lines are in what it prints, in order, a line ending in "..." standing for its start.
// An answer shown without -i must be 2xx.
func TestDocsServeCurl(t *testing.T) {
	if raceEnabled {
		// The race detector slows each request several times: a replay would cross the
		// policies' refills. Checked without it (make proofs).
		t.Skip("replays against the wall clock; checked without the race detector (make proofs)")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(abs, "docs", "serve.md"))
	if err != nil {
		t.Fatal(err)
	}
	type replay struct {
		line  int      // of the serve command's block
		args  []string // rlctl serve's
		steps []curlStep
	}
	var replays []*replay
	for _, b := range fencedBlocks(t, "docs/serve.md", string(doc)) {
		if b.lang == "sh" {
			for _, l := range strings.Split(b.text, "\n") {
				if args, ok := serveCommand(l); ok {
					replays = append(replays, &replay{line: b.line, args: args})
				}
			}
		}
		if !b.curls() {
			continue
		}
		if len(replays) == 0 {
			t.Fatalf("docs/serve.md:%d: a curl session before any rlctl serve command", b.line)
		}
		r := replays[len(replays)-1]
		steps, err := curlSession(b.text)
		if err != nil {
			t.Fatalf("docs/serve.md:%d: %v", b.line, err)
		}
		r.steps = append(r.steps, steps...)
	}
	replayed := 0
	for _, r := range replays {
		if len(r.steps) == 0 {
			continue
		}
		replayed++
		t.Run(fmt.Sprintf("line_%d", r.line), func(t *testing.T) {
			t.Chdir(abs)
			replayCurls(t, r.args, r.steps)
		})
	}
	if replayed == 0 {
		t.Error("docs/serve.md shows no curl session")
	}
}

// curls reports whether b is a session of curl commands.
func (b docBlock) curls() bool { return b.lang == "" && strings.HasPrefix(b.text, "$ curl ") }

// serveCommand returns the arguments of line's rlctl serve command (as a sh block writes
// it, "rlctl serve ARGS" or "go run ./cmd/rlctl serve ARGS", then perhaps a # comment).
func serveCommand(line string) ([]string, bool) {
	cmd, _, _ := strings.Cut(line, "#")
	cmd = strings.TrimSpace(cmd)
	for _, p := range []string{"rlctl serve ", "go run ./cmd/rlctl serve "} {
		if args, ok := strings.CutPrefix(cmd, p); ok {
			return strings.Fields(args), true
		}
	}
	return nil, false
}

// replayBudget is how long a replay may take before a difference is blamed on its pace:
// a remaining count shown is that of requests sent together, and the policies' fastest
// refill on the way (delays.hcl's, one every 500ms) would raise it in a slower one.
const replayBudget = 250 * time.Millisecond

// replayCurls runs rlctl serve with args and replays steps against it. A replay that
// differs from the page and took longer than replayBudget is run again, on a new service,
// up to three times in all.
func replayCurls(t *testing.T, args []string, steps []curlStep) {
	for attempt := 1; ; attempt++ {
		var diffs []string
		var took time.Duration
		serveWhile(t, args, func(web string) {
			start := time.Now()
			for _, s := range steps {
				diffs = append(diffs, s.replay(web, start)...)
			}
			took = time.Since(start)
		})
		if len(diffs) == 0 {
			return
		}
		if took <= replayBudget || attempt == 3 {
			for _, d := range diffs {
				t.Error(d)
			}
			return
		}
		t.Logf("the replay took %v, more than %v: again", took, replayBudget)
	}
}

// curlStep is one curl command of a session and the answer shown for it.
type curlStep struct {
	cmd     string // as shown, less "$ "
	method  string // GET, or POST with -d, or -X's
	target  string // the URL's path and query
	header  http.Header
	body    *string  // -d's
	include bool     // -i: the status line and headers are printed
	want    []string // the lines shown
}

// curlSession parses a session's text into its steps.
func curlSession(text string) ([]curlStep, error) {
	var steps []curlStep
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		cmd, ok := strings.CutPrefix(lines[i], "$ ")
		if !ok {
			if len(steps) == 0 {
				return nil, fmt.Errorf("%q comes before any command", lines[i])
			}
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, lines[i])
			continue
		}
		for strings.HasSuffix(cmd, " \\") && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, "\\") + strings.TrimSpace(lines[i])
		}
		s, err := parseCurl(cmd)
		if err != nil {
			return nil, fmt.Errorf("$ %s: %v", cmd, err)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// parseCurl reads the curl command cmd: -s, -S, -i (alone or together), -H, -d and -X,
// and one URL on localhost:8080.
func parseCurl(cmd string) (curlStep, error) {
	s := curlStep{cmd: cmd, header: http.Header{}}
	words, err := shellWords(cmd)
	if err != nil {
		return s, err
	}
	if len(words) == 0 || words[0] != "curl" {
		return s, fmt.Errorf("not a curl command")
	}
	url := ""
	for i := 1; i < len(words); i++ {
		w := words[i]
		value := func() (string, error) {
			if i+1 == len(words) {
				return "", fmt.Errorf("%s needs a value", w)
			}
			i++
			return words[i], nil
		}
		switch {
		case w == "-H" || w == "-d" || w == "-X":
			v, err := value()
			if err != nil {
				return s, err
			}
			switch w {
			case "-H":
				name, val, ok := strings.Cut(v, ":")
				if !ok {
					return s, fmt.Errorf("-H %q is not NAME: VALUE", v)
				}
				s.header.Add(name, strings.TrimSpace(val))
			case "-d":
				s.body = &v
			case "-X":
				s.method = v
			}
		case strings.HasPrefix(w, "-") && len(w) > 1 && strings.Trim(w[1:], "siS") == "":
			s.include = s.include || strings.Contains(w, "i")
		case strings.HasPrefix(w, "-"):
			return s, fmt.Errorf("the replay does not know curl's %s", w)
		case url != "":
			return s, fmt.Errorf("two URLs: %s and %s", url, w)
		default:
			url = w
		}
	}
	rest, ok := strings.CutPrefix(strings.TrimPrefix(url, "http://"), "localhost:8080")
	if !ok || rest != "" && !strings.HasPrefix(rest, "/") {
		return s, fmt.Errorf("the URL %q is not on localhost:8080, rlctl serve's -http", url)
	}
	s.target = rest
	switch {
	case s.method != "":
	case s.body != nil:
		s.method = http.MethodPost
	default:
		s.method = http.MethodGet
	}
	if s.body != nil && s.header.Get("Content-Type") == "" {
		s.header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl's -d sends
	}
	return s, nil
}

// shellWords splits cmd into words as sh does, for the quoting a curl line uses: '...',
// "..." with \" and \\, and \ outside quotes.
func shellWords(cmd string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // inside a word
	for i := 0; i < len(cmd); i++ {
		switch c := cmd[i]; c {
		case ' ', '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
			continue
		case '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("a ' that never ends")
			}
			w.WriteString(cmd[i+1 : i+1+j])
			i += j + 1
		case '"':
			for i++; ; i++ {
				if i == len(cmd) {
					return nil, fmt.Errorf(`a " that never ends`)
				}
				if cmd[i] == '"' {
					break
				}
				if cmd[i] == '\\' && i+1 < len(cmd) && (cmd[i+1] == '"' || cmd[i+1] == '\\') {
					i++
				}
				w.WriteByte(cmd[i])
			}
		case '\\':
			if i+1 < len(cmd) {
				i++
				w.WriteByte(cmd[i])
			}
		default:
			w.WriteByte(c)
		}
		in = true
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

// replay sends s to the service at web and returns how its answer differs from the one
// shown, the times allowed to be less by what has passed since start.
func (s curlStep) replay(web string, start time.Time) []string {
	var body io.Reader
	if s.body != nil {
		body = strings.NewReader(*s.body)
	}
	req, err := http.NewRequest(s.method, web+s.target, body)
	if err != nil {
		return []string{fmt.Sprintf("$ %s: %v", s.cmd, err)}
	}
	req.Header = s.header.Clone()
	client := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, // as curl without -L
	}
	resp, err := client.Do(req)
	if err != nil {
		return []string{fmt.Sprintf("$ %s: %v", s.cmd, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return []string{fmt.Sprintf("$ %s: %v", s.cmd, err)}
	}
	slack := time.Since(start)
	got := printed(resp, b, s.include)
	var diffs []string
	if !s.include && resp.StatusCode/100 != 2 {
		diffs = append(diffs, fmt.Sprintf("$ %s: status %s, which the page does not show (no -i)", s.cmd, resp.Status))
	}
	if slices.ContainsFunc(s.want, func(l string) bool { return strings.TrimSpace(l) == "..." }) {
		at := 0
		for _, w := range s.want {
			if strings.TrimSpace(w) == "..." {
				continue
			}
			prefix, partial := strings.CutSuffix(w, "...")
			found := false
			for ; at < len(got) && !found; at++ {
				found = got[at] == w || partial && strings.HasPrefix(got[at], prefix)
			}
			if !found {
				return append(diffs, fmt.Sprintf("$ %s: the line\n%s\nis not in its answer (in order):\n%s", s.cmd, w, strings.Join(got, "\n")))
			}
		}
		return diffs
	}
	same := len(got) == len(s.want)
	for i := 0; same && i < len(got); i++ {
		same = sameLine(s.want[i], got[i], slack)
	}
	if !same {
		diffs = append(diffs, fmt.Sprintf("$ %s: the answer is not the one shown (%v into the replay):\n--- shown\n%s\n--- printed\n%s", s.cmd, slack.Round(time.Millisecond), strings.Join(s.want, "\n"), strings.Join(got, "\n")))
	}
	return diffs
}

// printed is what curl prints of resp with body b, as lines: with include, the status
// line and the headers first (by name, then Date and Content-Length, as net/http's server
// writes them) and an empty line.
func printed(resp *http.Response, b []byte, include bool) []string {
	var out []string
	if include {
		out = append(out, resp.Proto+" "+resp.Status)
		var names []string
		for k := range resp.Header {
			if k != "Date" && k != "Content-Length" {
				names = append(names, k)
			}
		}
		slices.Sort(names)
		names = append(names, "Date", "Content-Length")
		for _, k := range names {
			for _, v := range resp.Header[k] {
				out = append(out, k+": "+v)
			}
		}
		out = append(out, "")
	}
	return append(out, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
}

// timeFields are the times of an answer, each with its unit: a time printed may be less
// than the one shown by the replay's duration so far.
var timeFields = []struct {
	re   *regexp.Regexp
	unit time.Duration
}{
	{regexp.MustCompile(`"(?:retry_after_ms|reset_after_ms)":(\d+)`), time.Millisecond},
	{regexp.MustCompile(`^Ratelimit: .*`), time.Second}, // its items' t, below
	{regexp.MustCompile(`^Retry-After: (\d+)$`), time.Second},
}

var rateLimitT = regexp.MustCompile(`;t=(\d+)`)

// sameLine reports whether the line printed, got, is the line shown, want: the same but
// for Date's and Content-Length's values and times less by at most slack.
func sameLine(want, got string, slack time.Duration) bool {
	for _, h := range []string{"Date: ", "Content-Length: "} {
		if strings.HasPrefix(want, h) {
			return strings.HasPrefix(got, h)
		}
	}
	for _, f := range timeFields {
		re := f.re
		if !re.MatchString(want) {
			continue
		}
		if re.NumSubexp() == 0 {
			re = rateLimitT
		}
		ws, wn := timesOf(re, want)
		gs, gn := timesOf(re, got)
		if ws != gs || len(wn) != len(gn) {
			return false
		}
		most := int64((slack + f.unit - 1) / f.unit)
		for i := range wn {
			if gn[i] > wn[i] || gn[i] < wn[i]-most {
				return false
			}
		}
		want, got = ws, gs
	}
	return want == got
}

// timesOf returns line with the numbers re's group matches written #, and the numbers.
func timesOf(re *regexp.Regexp, line string) (string, []int64) {
	var ns []int64
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(line, -1) {
		n, _ := strconv.ParseInt(line[m[2]:m[3]], 10, 64)
		ns = append(ns, n)
		b.WriteString(line[last:m[2]])
		b.WriteString("#")
		last = m[3]
	}
	b.WriteString(line[last:])
	return b.String(), ns
}

// TestCurlSameLine: the times of a line printed may be less than the ones shown by the
// slack, never more; Date's and Content-Length's values are not compared; the rest is.
func TestCurlSameLine(t *testing.T) {
	for _, c := range []struct {
		want, got string
		slack     time.Duration
		same      bool
	}{
		{`{"retry_after_ms":10000,"remaining":1}`, `{"retry_after_ms":10000,"remaining":1}`, 0, true},
		{`{"retry_after_ms":10000,"remaining":1}`, `{"retry_after_ms":9988,"remaining":1}`, 12 * time.Millisecond, true},
		{`{"retry_after_ms":10000,"remaining":1}`, `{"retry_after_ms":9987,"remaining":1}`, 12 * time.Millisecond, false},
		{`{"retry_after_ms":10000,"remaining":1}`, `{"retry_after_ms":10001,"remaining":1}`, time.Second, false},
		{`{"retry_after_ms":10000,"remaining":1}`, `{"retry_after_ms":10000,"remaining":2}`, time.Second, false},
		{`{"retry_after_ms":-1}`, `{"retry_after_ms":-2}`, time.Second, false},
		{`{"reset_after_ms":500,"window_ms":2000}`, `{"reset_after_ms":499,"window_ms":1999}`, time.Second, false},
		{`Ratelimit: "a.b";r=0;t=10`, `Ratelimit: "a.b";r=0;t=9`, time.Millisecond, true},
		{`Ratelimit: "a.b";r=0;t=10`, `Ratelimit: "a.b";r=1;t=10`, time.Second, false},
		{`Ratelimit-Policy: "a.b";q=3;w=30`, `Ratelimit-Policy: "a.b";q=3;w=29`, time.Second, false},
		{`Retry-After: 10`, `Retry-After: 9`, time.Millisecond, true},
		{`Retry-After: 10`, `Retry-After: 8`, time.Millisecond, false},
		{`Date: Mon, 07 Dec 2026 09:00:00 GMT`, `Date: Sun, 06 Dec 2026 21:17:45 GMT`, 0, true},
		{`Content-Length: 477`, `Content-Length: 476`, 0, true},
		{`Content-Type: application/json`, `Content-Type: application/problem+json`, 0, false},
	} {
		if got := sameLine(c.want, c.got, c.slack); got != c.same {
			t.Errorf("sameLine(%q, %q, %v) = %v, want %v", c.want, c.got, c.slack, got, c.same)
		}
	}
}
