package playground

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rlctl/rlctl/internal/syncbuf"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A minimal W3C WebDriver client (https://www.w3.org/TR/webdriver2/), enough to drive
// the playground in a headless Chromium through chromedriver: sessions, navigation,
// elements, keys, scripts and screenshots.

// requireBrowserEnv names the environment variable that turns a missing browser from a
// skip into a failure.
const requireBrowserEnv = "RLCTL_REQUIRE_BROWSER"

// browserBinaries returns the paths of chromium and chromedriver, or skips the test (fails
// it when RLCTL_REQUIRE_BROWSER=1) when one is missing, saying how to install them.
func browserBinaries(t *testing.T) (chromium, chromedriver string) {
	t.Helper()
	look := func(names ...string) string {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
			if p := filepath.Join("/usr/bin", n); fileExists(p) {
				return p
			}
		}
		return ""
	}
	chromium, chromedriver = look("chromium", "chromium-browser"), look("chromedriver")
	var missing []string
	if chromium == "" {
		missing = append(missing, "chromium")
	}
	if chromedriver == "" {
		missing = append(missing, "chromedriver")
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("BROWSER TEST NOT RUN: %s not found on PATH or in /usr/bin: install them (apt-get install -y chromium chromium-driver, "+
			"or make browser-deps); set %s=1 to make this a failure", strings.Join(missing, " and "), requireBrowserEnv)
		if os.Getenv(requireBrowserEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return chromium, chromedriver
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// webDriver is one session of a chromedriver the test started.
type webDriver struct {
	t       *testing.T
	session string // http://127.0.0.1:PORT/session/ID
	client  *http.Client
}

// lineWatch closes seen once the output written to it holds want.
type lineWatch struct {
	want string
	seen chan struct{}
	mu   sync.Mutex
	buf  []byte
	done bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.buf = append(w.buf, p...)
		if bytes.Contains(w.buf, []byte(w.want)) {
			w.done = true
			close(w.seen)
		}
	}
	return len(p), nil
}

// startBrowser starts chromedriver on a loopback port and a headless Chromium session in
// it, both stopped at the test's cleanup.
func startBrowser(t *testing.T, chromium, chromedriver string) *webDriver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var logs syncbuf.Buffer
	started := &lineWatch{want: "started successfully", seen: make(chan struct{})}
	cmd := exec.Command(chromedriver, "--port="+strconv.Itoa(port), "--allowed-ips=127.0.0.1")
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&logs, started), &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", chromedriver, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("chromedriver's output:\n%s", logs.String())
		}
	})
	// chromedriver says so on stdout once it listens: wait for that line, not a clock.
	select {
	case <-started.seen:
	case <-exited:
		t.Fatalf("chromedriver exited before it listened:\n%s", logs.String())
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	// No client timeout: a wait runs in the page (waitFor) for as long as the test's own
	// -timeout allows.
	client := &http.Client{}
	profile := t.TempDir()
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		// waitFor's scripts wait in the page; the test's -timeout bounds them, not this.
		"timeouts": map[string]any{"script": nil},
		"goog:chromeOptions": map[string]any{
			"binary": chromium,
			"args": []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
				"--disable-background-networking", "--disable-component-update", "--disable-sync",
				"--disable-dev-shm-usage", "--window-size=1440,1000", "--user-data-dir=" + profile},
		},
	}}}
	d := &webDriver{t: t, client: client, session: base + "/session"}
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if err := d.call("POST", "", caps, &created); err != nil || created.SessionID == "" {
		t.Fatalf("new session: %v\n%s", err, logs.String())
	}
	d.session = base + "/session/" + created.SessionID
	t.Cleanup(func() {
		if err := d.call("DELETE", "", nil, nil); err != nil {
			t.Logf("delete session: %v", err)
		}
	})
	return d
}

// call sends one WebDriver command, path relative to the session, and decodes the reply's
// value into out (when not nil).
func (d *webDriver) call(method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.session+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var reply struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return fmt.Errorf("%s %s: %s: %v", method, path, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error, Message string }
		_ = json.Unmarshal(reply.Value, &e)
		msg, _, _ := strings.Cut(e.Message, "\n  (Session info") // chromedriver's trailer
		return fmt.Errorf("%s %s: %s: %s", method, path, e.Error, msg)
	}
	if out != nil {
		return json.Unmarshal(reply.Value, out)
	}
	return nil
}

func (d *webDriver) must(err error) {
	d.t.Helper()
	if err != nil {
		d.t.Fatal(err)
	}
}

func (d *webDriver) navigate(url string) {
	d.t.Helper()
	d.must(d.call("POST", "/url", map[string]string{"url": url}, nil))
}

// elementKey is the W3C name of an element reference's field.
const elementKey = "element-6066-11e4-a52e-4f735466cecf"

// find returns the element CSS selector sel matches first.
func (d *webDriver) find(sel string) string {
	d.t.Helper()
	var ref map[string]string
	d.must(d.call("POST", "/element", map[string]string{"using": "css selector", "value": sel}, &ref))
	if ref[elementKey] == "" {
		d.t.Fatalf("find %s: no element reference in %v", sel, ref)
	}
	return ref[elementKey]
}

// onElement calls the element command method path (after /element/ID) on the element sel
// matches. The page redraws elements as results arrive (the tabs, the diagnostics), so one
// found may be replaced before the command reaches it: a stale element is found again, a
// few times, as a user would look again and click the new one.
func (d *webDriver) onElement(sel, method, path string, body, out any) {
	d.t.Helper()
	for try := 1; ; try++ {
		err := d.call(method, "/element/"+d.find(sel)+path, body, out)
		if err != nil && try < 5 && strings.Contains(err.Error(), "stale element reference") {
			continue
		}
		d.must(err)
		return
	}
}

func (d *webDriver) click(sel string) {
	d.t.Helper()
	d.onElement(sel, "POST", "/click", map[string]any{}, nil)
}

// sendKeys types text into the element sel matches, as a user would: into the focused
// element at its cursor (replacing a selection), else at the end of its text.
func (d *webDriver) sendKeys(sel, text string) {
	d.t.Helper()
	d.onElement(sel, "POST", "/value", map[string]string{"text": text}, nil)
}

func (d *webDriver) text(sel string) string {
	d.t.Helper()
	var s string
	d.onElement(sel, "GET", "/text", nil, &s)
	return s
}

// exec runs script, a function body, in the page with args (arguments[0], …) and decodes
// what it returns (awaited, when a promise) into out, when not nil.
func (d *webDriver) exec(out any, script string, args ...any) {
	d.t.Helper()
	if args == nil {
		args = []any{}
	}
	d.must(d.call("POST", "/execute/sync", map[string]any{"script": script, "args": args}, out))
}

// waitFor waits, in the page, until script returns something other than null, false or
// "" (an exception counts as not yet), and decodes that into out (when not nil); what
// describes the wait. The page re-runs script on each animation frame and answers the
// moment it holds, so the test waits for the page's own events, with no clock of its own
// (the session's script timeout is off: the test's -timeout bounds a wait that never ends).
func (d *webDriver) waitFor(what string, out any, script string, args ...any) {
	d.t.Helper()
	if args == nil {
		args = []any{}
	}
	wrapped := `const done = arguments[arguments.length - 1];
const args = Array.prototype.slice.call(arguments, 0, -1);
const cond = function() { ` + script + ` };
(function poll() {
  let v = null;
  try { v = cond.apply(null, args); } catch (e) { v = null; }
  if (v !== null && v !== undefined && v !== false && v !== "") { done(v); } else { requestAnimationFrame(poll); }
})();`
	var v json.RawMessage
	if err := d.call("POST", "/execute/async", map[string]any{"script": wrapped, "args": args}, &v); err != nil {
		var status string
		_ = d.call("POST", "/execute/sync", map[string]any{"script": `return document.getElementById("status").textContent + " | " + document.getElementById("run-status").textContent`, "args": []any{}}, &status)
		d.screenshot("failed")
		d.t.Fatalf("waiting for %s: %v (page status: %s)", what, err, status)
	}
	if out != nil {
		d.must(json.Unmarshal(v, out))
	}
}

// screenshot saves the viewport as $RLCTL_SCREENSHOTS/name.png when that is set.
func (d *webDriver) screenshot(name string) {
	d.t.Helper()
	dir := os.Getenv("RLCTL_SCREENSHOTS")
	if dir == "" {
		return
	}
	var b64 string
	if err := d.call("GET", "/screenshot", nil, &b64); err != nil {
		d.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	png, err := base64.StdEncoding.DecodeString(b64)
	if err == nil && !bytes.HasPrefix(png, []byte("\x89PNG")) {
		err = errors.New("not a PNG")
	}
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
	if err != nil {
		d.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	d.t.Logf("screenshot %s", filepath.Join(dir, name+".png"))
}
