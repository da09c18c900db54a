package listen

import (
	"net"
	"sync"
)

// Limit returns a listener that holds at most n of l's connections open at once. A
// connection accepted past n is closed at once (refused, when not nil, is called first),
// so the kernel's backlog never fills with connections nobody accepts and a flood
// cannot lock out the clients that come after it: they get in as soon as connections
// close. A connection counts until its Close, which may be called more than once.
// n < 1 is taken as 1.
func Limit(l net.Listener, n int, refused func()) net.Listener {
	return &limited{Listener: l, slots: make(chan struct{}, max(n, 1)), refused: refused}
}

type limited struct {
	net.Listener
	slots   chan struct{}
	refused func()
}

func (l *limited) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
		default:
			// refused first: by the time the peer sees the close, the refusal is counted.
			if l.refused != nil {
				l.refused()
			}
			_ = c.Close()
		}
	}
}

type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
