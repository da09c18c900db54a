package listen

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlctl/rlctl/internal/testcert"
)

// handshake connects to a TLS listener made with server and returns the certificate
// it served, or the handshake's error.
func handshake(t *testing.T, server, client *tls.Config) (string, error) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := tls.NewListener(raw, server)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c, err := tls.Dial("tcp", raw.Addr().String(), client)
	if err != nil {
		return "", err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate on the first read.
	if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// TestTLSReload: the pair is read at every Reload, a new pair is served from the next
// handshake, and one that does not load keeps the pair served.
func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.New(t, "ca")
	ca.Server(t, dir, "one")
	ca.Server(t, dir, "two")
	cert, key := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	install := func(name string) {
		t.Helper()
		for from, to := range map[string]string{name + ".crt": cert, name + ".key": key} {
			b, err := os.ReadFile(filepath.Join(dir, from))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install("one")
	tt, err := LoadTLS(cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	served := func(want string) {
		t.Helper()
		got, err := handshake(t, tt.Config(), client)
		if err != nil || got != want {
			t.Fatalf("served %q (%v), want %q", got, err, want)
		}
	}
	served("one")
	install("two")
	if err := tt.Reload(); err != nil {
		t.Fatal(err)
	}
	served("two")
	// A half-done rotation: one's certificate with two's key.
	b, _ := os.ReadFile(filepath.Join(dir, "one.crt"))
	if err := os.WriteFile(cert, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tt.Reload(); err == nil {
		t.Fatal("a certificate with another's key reloaded")
	}
	served("two")
}

func TestLoadTLSErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.New(t, "ca")
	p := ca.Server(t, dir, "s")
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, cert, key, ca string }{
		{"missing cert", filepath.Join(dir, "none"), p.KeyFile, ""},
		{"junk key", p.CertFile, junk, ""},
		{"junk client CA", p.CertFile, p.KeyFile, junk},
		{"missing client CA", p.CertFile, p.KeyFile, filepath.Join(dir, "none")},
	} {
		if _, err := LoadTLS(c.cert, c.key, c.ca); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestTLSClientCA: with client CAs, a client without a certificate, or with one of
// another CA, is refused; one with a certificate of the CA gets in.
func TestTLSClientCA(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcert.New(t, "ca"), testcert.New(t, "other")
	p := ca.Server(t, dir, "server")
	tt, err := LoadTLS(p.CertFile, p.KeyFile, ca.WriteFile(t, dir, "clients.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if !tt.ClientAuth() {
		t.Fatal("ClientAuth() = false with client CAs")
	}
	mine, theirs := ca.Client(t, dir, "mine"), other.Client(t, dir, "theirs")
	for _, c := range []struct {
		name string
		pair *testcert.Pair
		ok   bool
	}{{"no certificate", nil, false}, {"another CA's", &theirs, false}, {"the CA's", &mine, true}} {
		client := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		if c.pair != nil {
			kp, err := tls.LoadX509KeyPair(c.pair.CertFile, c.pair.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			client.Certificates = []tls.Certificate{kp}
		}
		if _, err := handshake(t, tt.Config(), client); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
