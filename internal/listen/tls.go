package listen

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// TLS is a listener's certificate, read from a certificate and a key file, and the CA
// its clients' certificates must chain to, if any. Reload re-reads the pair: a pair that
// loads replaces the one served from the next handshake on, and one that does not (a
// half-written file, a key that does not match) keeps the running pair. It is safe for
// concurrent use.
type TLS struct {
	certFile, keyFile string
	clientCAs         *x509.CertPool
	cur               atomic.Pointer[tls.Certificate]
}

// LoadTLS reads the PEM certificate chain of certFile with its private key in keyFile
// and, when clientCAFile is not "", the PEM CA certificates a client's certificate must
// chain to (every client must then present one). An error says which file is wrong.
// The client CAs are read once: a change to them needs a restart.
func LoadTLS(certFile, keyFile, clientCAFile string) (*TLS, error) {
	t := &TLS{certFile: certFile, keyFile: keyFile}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, err
		}
		t.clientCAs = x509.NewCertPool()
		if !t.clientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in it", clientCAFile)
		}
	}
	return t, nil
}

// Reload re-reads the certificate and key files. On an error the pair served stays
// the one loaded last.
func (t *TLS) Reload() error {
	if t.certFile == "" || t.keyFile == "" {
		return errors.New("TLS needs both a certificate and a key file")
	}
	c, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
	if err != nil {
		return fmt.Errorf("%s, %s: %w", t.certFile, t.keyFile, err)
	}
	t.cur.Store(&c)
	return nil
}

// Files are the files Reload reads.
func (t *TLS) Files() []string { return []string{t.certFile, t.keyFile} }

// Config returns a server configuration that serves the pair loaded last at every
// handshake, TLS 1.2 at least, and with client CAs requires and verifies a client
// certificate (tls.RequireAndVerifyClientCert).
func (t *TLS) Config() *tls.Config {
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return t.cur.Load(), nil },
	}
	if t.clientCAs != nil {
		c.ClientCAs, c.ClientAuth = t.clientCAs, tls.RequireAndVerifyClientCert
	}
	return c
}

// ClientAuth reports whether clients must present a certificate.
func (t *TLS) ClientAuth() bool { return t.clientCAs != nil }
