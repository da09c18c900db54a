package redistest

import (
	"net"
	"strconv"
	"testing"
)

// TLSFiles are the PEM files of a server that speaks TLS: its certificate and key, and
// the CA that signs the clients' certificates.
type TLSFiles struct {
	Cert, Key, CA string
	// AuthClients makes the server require a client certificate signed by CA
	// (tls-auth-clients yes); otherwise it accepts clients without one.
	AuthClients bool
}

// StartTLS starts a redis-server private to the test that also speaks TLS on a port of
// its own, TLSAddr; Addr, Do and Client stay on the plain port. Stopped at tb.Cleanup.
func StartTLS(tb testing.TB, f TLSFiles) *TLSServer {
	tb.Helper()
	requireBinaries(tb)
	port, err := freePort(false)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	auth := "optional"
	if f.AuthClients {
		auth = "yes"
	}
	s := &Server{port: 0, dir: tb.TempDir(), extra: []string{
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", f.Cert, "--tls-key-file", f.Key, "--tls-ca-cert-file", f.CA,
		"--tls-auth-clients", auth,
	}}
	var p *process
	for range bindAttempts {
		if s.port, err = freePort(false); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		if p, err = s.launch(); err == nil || err != errPortInUse {
			break
		}
	}
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s.proc = p
	remember(s)
	tb.Cleanup(s.Stop)
	return &TLSServer{Server: s, tlsPort: port}
}

// TLSServer is a Server that also speaks TLS.
type TLSServer struct {
	*Server
	tlsPort int
}

// TLSAddr returns the server's TLS address, "127.0.0.1:PORT".
func (s *TLSServer) TLSAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}
