package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisConfig is what serve's -redis flags say: the server's URL, its type, and the
// files of the TLS client identity and of the CAs that sign the server's certificate.
type redisConfig struct {
	url, typ               string
	tlsCert, tlsKey, tlsCA string
}

// redisDialTimeout bounds one connection's dial and TLS handshake, whatever the deadline
// of the decision that needed the connection (see tlsDialer).
const redisDialTimeout = 5 * time.Second

// client makes the client of the flags, configured as the engine expects: calls end at
// their context's deadline and are never retried (on_error decides failed calls; a
// retried call whose reply was lost would be charged twice). With TLS (a rediss:// URL)
// it connects through a tlsDialer, which logs why a handshake failed at error level on
// log. No error it returns holds the URL's password.
func (c redisConfig) client(log *slog.Logger) (redis.UniversalClient, error) {
	switch c.typ {
	case "single":
		o, err := redis.ParseURL(c.url)
		if err != nil {
			return nil, redactErr(err, c.url)
		}
		if o.Dialer, err = c.dialer(o.TLSConfig, log); err != nil {
			return nil, err
		}
		o.MaxRetries, o.ContextTimeoutEnabled = -1, true
		return redis.NewClient(o), nil
	case "cluster":
		o, err := redis.ParseClusterURL(c.url)
		if err != nil {
			return nil, redactErr(err, c.url)
		}
		if o.TLSConfig != nil {
			// Each node is verified by its own address, not by the first one's.
			o.TLSConfig.ServerName = ""
		}
		if o.Dialer, err = c.dialer(o.TLSConfig, log); err != nil {
			return nil, err
		}
		o.MaxRetries, o.ContextTimeoutEnabled = -1, true
		return redis.NewClusterClient(o), nil
	case "sentinel":
		o, err := redis.ParseFailoverURL(c.url)
		if err != nil {
			return nil, redactErr(err, c.url)
		}
		if o.MasterName == "" {
			return nil, errors.New("a sentinel URL needs ?master_name=NAME")
		}
		if o.Dialer, err = c.dialer(o.TLSConfig, log); err != nil {
			return nil, err
		}
		o.MaxRetries, o.ContextTimeoutEnabled = -1, true
		return redis.NewFailoverClient(o), nil
	}
	return nil, fmt.Errorf("-redis-type %q: use single, cluster or sentinel", c.typ)
}

// dialer returns the dialer of a client whose URL gives conf (nil for redis://): nil,
// go-redis's own, without TLS; a tlsDialer with the flags' files added to conf with it.
func (c redisConfig) dialer(conf *tls.Config, log *slog.Logger) (func(context.Context, string, string) (net.Conn, error), error) {
	if err := c.needsTLS(conf); err != nil {
		return nil, err
	}
	if conf == nil {
		return nil, nil
	}
	files, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	if files != nil {
		conf.GetClientCertificate, conf.RootCAs = files.GetClientCertificate, files.RootCAs
	}
	return (&tlsDialer{conf: conf, log: log}).dial, nil
}

// needsTLS refuses TLS files for a URL that does not ask for TLS: the files would be
// ignored, and the connection sent in the clear.
func (c redisConfig) needsTLS(conf *tls.Config) error {
	if conf == nil && (c.tlsCert != "" || c.tlsCA != "") {
		return errors.New("-redis-tls-cert and -redis-tls-ca need a rediss:// URL (TLS); this one is redis://, in the clear")
	}
	return nil
}

// tlsConfig reads the TLS files: the CAs (a PEM file) and the client identity, whose
// files are read again when they change (a rotated certificate is used from the next
// connection on). Nil when no file is given.
func (c redisConfig) tlsConfig() (*tls.Config, error) {
	return clientTLS("-redis-tls", c.tlsCA, c.tlsCert, c.tlsKey)
}

// clientTLS is the TLS configuration of a client whose flags are prefix-ca, prefix-cert
// and prefix-key: the CAs that sign the server's certificate (a PEM file; "" for the
// system's) and the client identity, read again when its files change (a rotated
// certificate is used from the next connection on). Nil when no file is given.
func clientTLS(prefix, ca, cert, key string) (*tls.Config, error) {
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s-cert and %s-key go together: the client certificate and its private key", prefix, prefix)
	}
	if cert == "" && ca == "" {
		return nil, nil
	}
	conf := &tls.Config{}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s-ca: %v", prefix, err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s-ca %s: no PEM certificate in the file", prefix, ca)
		}
	}
	if cert != "" {
		kp := &keyPair{cert: cert, key: key}
		if _, err := kp.get(); err != nil {
			return nil, fmt.Errorf("%s-cert/%s-key: %v", prefix, prefix, err)
		}
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() }
	}
	return conf, nil
}

// keyPair is a certificate and key read from files, read again when either file's
// modification time or size changes. A pair that no longer loads keeps the last good one.
type keyPair struct {
	cert, key string

	mu    sync.Mutex
	stamp string
	pair  *tls.Certificate
}

func (k *keyPair) get() (*tls.Certificate, error) {
	stamp := fileStamp(k.cert) + "|" + fileStamp(k.key)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pair != nil && stamp == k.stamp {
		return k.pair, nil
	}
	pair, err := tls.LoadX509KeyPair(k.cert, k.key)
	if err != nil {
		if k.pair != nil {
			return k.pair, nil
		}
		return nil, err
	}
	k.pair, k.stamp = &pair, stamp
	return k.pair, nil
}

func fileStamp(name string) string {
	fi, err := os.Stat(name)
	if err != nil {
		return ""
	}
	return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
}

// tlsDialer dials Redis over TLS. The dial and handshake run for up to redisDialTimeout
// even when the call that needed the connection gives up sooner (the engine's deadline is
// tens of milliseconds), so the real reason of a failed handshake (an unknown CA, a name
// mismatch, a refused client certificate) is seen and logged, not hidden behind the
// caller's "context deadline exceeded". A connection made after its caller left is
// closed.
type tlsDialer struct {
	conf *tls.Config
	log  *slog.Logger

	mu     sync.Mutex
	logged map[string]time.Time // when each reason was last logged
}

func (d *tlsDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisDialTimeout)
		defer cancel()
		raw, err := (&net.Dialer{}).DialContext(hctx, network, addr)
		if err != nil {
			done <- result{nil, err}
			return
		}
		conf := d.conf.Clone()
		if conf.ServerName == "" {
			conf.ServerName, _, _ = net.SplitHostPort(addr)
		}
		c := tls.Client(raw, conf)
		if err := c.HandshakeContext(hctx); err != nil {
			raw.Close()
			d.report(addr, err)
			done <- result{nil, fmt.Errorf("TLS with %s: %s", addr, tlsReason(err))}
			return
		}
		done <- result{c, nil}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// report logs a failed handshake, each distinct reason at most once a minute.
func (d *tlsDialer) report(addr string, err error) {
	reason := tlsReason(err)
	now := time.Now()
	d.mu.Lock()
	if d.logged == nil {
		d.logged = map[string]time.Time{}
	}
	last, seen := d.logged[reason]
	if seen && now.Sub(last) < time.Minute {
		d.mu.Unlock()
		return
	}
	d.logged[reason] = now
	d.mu.Unlock()
	if d.log != nil {
		d.log.Error("rlctl serve: the TLS handshake with Redis failed", "addr", addr, "error", reason)
	}
}

// tlsReason says why a TLS handshake failed and what to do about it.
func tlsReason(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		return err.Error() + ": the server's certificate is not signed by a CA of -redis-tls-ca (or of the system when that flag is not given)"
	case errors.As(err, &host):
		return err.Error() + ": the server's certificate does not name the host of -redis"
	case errors.As(err, &invalid):
		return err.Error() + ": the server's certificate is expired or not valid for serving"
	case errors.As(err, &record):
		return err.Error() + ": the server does not speak TLS (use a redis:// URL, or enable TLS on the server)"
	case errors.As(err, &verify):
		return err.Error()
	case strings.Contains(err.Error(), "certificate required") || strings.Contains(err.Error(), "bad certificate"):
		return err.Error() + ": the server wants a client certificate it accepts (-redis-tls-cert and -redis-tls-key)"
	}
	return err.Error()
}

// redactErr returns err with every copy of the URL's password (in its user information
// or a password= parameter) replaced by "xxxxx".
func redactErr(err error, rawURL string) error {
	msg := err.Error()
	for _, secret := range secretsOf(rawURL) {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
	}
	return errors.New(msg)
}

// secretsOf finds a URL's passwords without parsing it (a URL that does not parse is
// what needs redacting): the text between the first ':' and the last '@' of the
// authority, and the value of password=, raw and unescaped, longest first.
func secretsOf(raw string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if u, err := url.PathUnescape(s); err == nil && u != s {
			out = append(out, u)
		}
		if u := url.PathEscape(s); u != s {
			out = append(out, u)
		}
	}
	rest := raw
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	auth := rest
	if i := strings.IndexAny(auth, "/?#"); i >= 0 {
		auth = auth[:i]
	}
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		user := auth[:at]
		if c := strings.Index(user, ":"); c >= 0 {
			add(user[c+1:])
		} else {
			add(user) // redis://secret@host: go-redis reads a lone user name as the password
		}
	}
	for _, p := range []string{"password=", "sentinel_password="} {
		for q := raw; ; {
			i := strings.Index(q, p)
			if i < 0 {
				break
			}
			q = q[i+len(p):]
			v := q
			if j := strings.IndexAny(v, "&#"); j >= 0 {
				v = v[:j]
			}
			add(v)
		}
	}
	// Longest first, so a secret holding another is replaced whole.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) > len(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// probeRedis asks the server for a PING, bounded by redisDialTimeout, and logs at error
// level why it does not answer; the service starts anyway (the policies' on_error decide
// until Redis answers).
func probeRedis(c redis.UniversalClient, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), redisDialTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		log.Error("rlctl serve: Redis does not answer; the policies' on_error decide until it does", "error", err.Error())
	}
}
