package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/internal/testcert"
)

// TestRedisURLRedacted: a -redis URL that does not parse, or that go-redis refuses, is
// reported without its password, in any of the forms the password may take.
func TestRedisURLRedacted(t *testing.T) {
	for _, tc := range []struct{ url, typ, secret string }{
		{"redis://user:s3cr%zzet@host:6379", "single", "s3cr%zzet"},
		{"redis://user:hunter2@ho st:6379", "single", "hunter2"},
		{"redis://user:hunter2@host:6379/notadb", "single", "hunter2"},
		{"redis://hunter2@host:6379/1/2", "single", "hunter2"},
		{"rediss://user:p%40ss@host:6379/x", "single", "p@ss"},
		{"redis://host:6379/1?password=hunter2&db=x", "single", "hunter2"},
		{"redis://user:hunter2@host:6379?dial_timeout=forever", "cluster", "hunter2"},
		{"redis://user:hunter2@host:6379?db=x", "sentinel", "hunter2"},
		{"xredis://user:hunter2@host:6379", "single", "hunter2"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := redisConfig{url: tc.url, typ: tc.typ}.client(nil)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Fatalf("the error shows the password: %v", err)
			}
			if tc.secret != "hunter2" && strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// TestRedisTLSFlags: the TLS files must come in pairs and need a rediss:// URL.
func TestRedisTLSFlags(t *testing.T) {
	pki := newPKI(t)
	for _, tc := range []struct {
		c    redisConfig
		want string
	}{
		{redisConfig{url: "redis://127.0.0.1:1", typ: "single", tlsCA: pki.ca}, "need a rediss:// URL"},
		{redisConfig{url: "rediss://127.0.0.1:1", typ: "single", tlsCert: pki.clientCert}, "go together"},
		{redisConfig{url: "rediss://127.0.0.1:1", typ: "single", tlsCA: pki.clientKey}, "no PEM certificate"},
		{redisConfig{url: "rediss://127.0.0.1:1", typ: "single", tlsCA: filepath.Join(t.TempDir(), "none.pem")}, "-redis-tls-ca"},
	} {
		if _, err := tc.c.client(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.c, err, tc.want)
		}
	}
}

// TestRedisClientCertificate: a server that requires client certificates
// (tls-auth-clients yes) accepts -redis-tls-cert/-redis-tls-key, and the errors of a
// missing client certificate and of an unknown CA say what is wrong.
func TestRedisClientCertificate(t *testing.T) {
	pki := newPKI(t)
	srv := redistest.StartTLS(t, redistest.TLSFiles{Cert: pki.serverCert, Key: pki.serverKey, CA: pki.ca, AuthClients: true})
	url := "rediss://" + srv.TLSAddr()
	ping := func(c redisConfig) error {
		c.url, c.typ = url, "single"
		rc, err := c.client(nil)
		if err != nil {
			return err
		}
		defer rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return rc.Ping(ctx).Err()
	}
	if err := ping(redisConfig{tlsCert: pki.clientCert, tlsKey: pki.clientKey, tlsCA: pki.ca}); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	// Redis refuses a client without a certificate after the handshake (TLS 1.3), so the
	// error is the server's alert, which says a certificate is required.
	if err := ping(redisConfig{tlsCA: pki.ca}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without a client certificate: %v, want an error about the certificate", err)
	}
	other := newPKI(t)
	err := ping(redisConfig{tlsCert: pki.clientCert, tlsKey: pki.clientKey, tlsCA: other.ca})
	if err == nil || !strings.Contains(err.Error(), "not signed by a CA of -redis-tls-ca") {
		t.Errorf("with another CA: %v, want the reason", err)
	}
}

// pki is a CA and the server and client certificates it signs, as PEM files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.New(t, "test CA")
	server, client := ca.Server(t, dir, "server"), ca.Client(t, dir, "client")
	return pki{ca: ca.WriteFile(t, dir, "ca.crt"), serverCert: server.CertFile, serverKey: server.KeyFile, clientCert: client.CertFile, clientKey: client.KeyFile}
}
