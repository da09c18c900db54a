package listen

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimit: past n open connections a new one is closed at once (the client reads EOF)
// and counted, the open ones keep working, and a slot freed by a Close lets the next in.
func TestLimit(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	l := Limit(raw, 2, func() { refused.Add(1) })
	defer l.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// A bound for a broken Limit, never reached by a working one.
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		return c
	}
	a, b := dial(), dial()
	sa, sb := <-accepted, <-accepted

	over := dial()
	if n, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the connection past the cap: read %d, %v; want EOF at once", n, err)
	}
	if got := refused.Load(); got != 1 {
		t.Errorf("refused %d connections, want 1", got)
	}
	// The open ones still carry bytes both ways.
	for _, p := range [][2]net.Conn{{a, sa}, {b, sb}} {
		if _, err := p[0].Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := io.ReadFull(p[1], buf); err != nil {
			t.Fatalf("an open connection stopped working: %v", err)
		}
	}
	// A Close frees a slot (twice is once), and the next connection is accepted.
	sa.Close()
	sa.Close()
	next := dial()
	sn := <-accepted
	if _, err := sn.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(next, make([]byte, 1)); err != nil {
		t.Fatalf("a connection after a slot was freed: %v", err)
	}
	if l2 := dial(); true {
		if _, err := l2.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("a second Close of one connection freed two slots: %v", err)
		}
	}
}
