package listen

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// TestHTTPServerDefaults: the server is made with the documented limits.
func TestHTTPServerDefaults(t *testing.T) {
	s := HTTPServer(http.NotFoundHandler(), Defaults)
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"ReadHeaderTimeout", s.ReadHeaderTimeout, 5 * time.Second},
		{"ReadTimeout", s.ReadTimeout, 10 * time.Second},
		{"WriteTimeout", s.WriteTimeout, 10 * time.Second},
		{"IdleTimeout", s.IdleTimeout, 60 * time.Second},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.MaxHeaderBytes != 16<<10 {
		t.Errorf("MaxHeaderBytes = %d, want 16 KiB", s.MaxHeaderBytes)
	}
}

// short are limits small enough for a test to see them act.
var short = Limits{
	ReadHeader: 100 * time.Millisecond, Read: 200 * time.Millisecond, Write: time.Second, Idle: 100 * time.Millisecond,
	MaxHeaderBytes: 1 << 10, Handshake: 100 * time.Millisecond,
	Ping: time.Second, PingTimeout: time.Second, MinClientPing: time.Second, MaxStreams: 4,
}

// dialServer serves with serve on a loopback listener and returns a connection to it
// whose reads end, should the server never close it, at a bound no working limit nears.
func dialServer(t *testing.T, serve func(net.Listener)) net.Conn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go serve(l)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	return c
}

// closedByServer reads c to its end and fails the test unless the server closed it (a
// read that ends at c's own deadline is the server holding it).
func closedByServer(t *testing.T, c net.Conn, what string) string {
	t.Helper()
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: the server still holds the connection", what)
	}
	return string(b)
}

// TestHTTPSlowBody: a client that sends its headers and then trickles its body (here,
// one byte and then nothing) is cut off by the read timeout.
func TestHTTPSlowBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	s := HTTPServer(h, short)
	defer s.Close()
	c := dialServer(t, func(l net.Listener) { _ = s.Serve(l) })
	if _, err := io.WriteString(c, "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	closedByServer(t, c, "a trickled body")
}

// TestHTTPSlowHeaders: a client that never ends its headers is cut off.
func TestHTTPSlowHeaders(t *testing.T) {
	s := HTTPServer(http.NotFoundHandler(), short)
	defer s.Close()
	c := dialServer(t, func(l net.Listener) { _ = s.Serve(l) })
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	closedByServer(t, c, "trickled headers")
}

// TestHTTPIdle: a kept-alive connection with no next request is closed.
func TestHTTPIdle(t *testing.T) {
	s := HTTPServer(http.NotFoundHandler(), short)
	defer s.Close()
	c := dialServer(t, func(l net.Listener) { _ = s.Serve(l) })
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server did not keep the connection alive: nothing to time out")
	}
	rest, err := io.ReadAll(r)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("an idle kept-alive connection: the server still holds it")
	}
	if len(rest) > 0 {
		t.Fatalf("bytes on an idle connection: %q", rest)
	}
}

// TestHTTPHeaderBytes: headers past MaxHeaderBytes are refused.
func TestHTTPHeaderBytes(t *testing.T) {
	s := HTTPServer(http.NotFoundHandler(), short)
	defer s.Close()
	c := dialServer(t, func(l net.Listener) { _ = s.Serve(l) })
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 8<<10)+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if got := closedByServer(t, c, "huge headers"); !strings.Contains(got, " 431 ") {
		t.Errorf("huge headers answered %q, want 431", got)
	}
}

// TestGRPCHandshake: a connection that never sends gRPC's HTTP/2 preface is closed.
func TestGRPCHandshake(t *testing.T) {
	g := grpc.NewServer(GRPCOptions(short)...)
	defer g.Stop()
	c := dialServer(t, func(l net.Listener) { _ = g.Serve(l) })
	closedByServer(t, c, "a connection that sends nothing")
}
