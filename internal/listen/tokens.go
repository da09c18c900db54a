package listen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Tokens are the bearer tokens a caller may present, read from a file: one token a
// line, spaces around it trimmed, blank lines and lines starting with # ignored; a line
// "admin TOKEN" gives its token the admin right besides. Reload re-reads the file; a file
// that does not read, or holds no token, keeps the tokens loaded last (an empty file must
// not lock every caller out, nor let every caller in). Every token lets its holder call
// everything the listener serves but what Admin guards. It is safe for concurrent use.
type Tokens struct {
	path string
	// sums are the SHA-256 of the tokens: a presented token is hashed and compared with
	// each in constant time, so neither its bytes nor its length leak through timing.
	sums atomic.Pointer[[]tokenSum]
}

type tokenSum struct {
	sum   [sha256.Size]byte
	admin bool
}

// LoadTokens reads the tokens of path.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload re-reads the file. On an error the tokens stay the ones loaded last.
func (t *Tokens) Reload() error {
	b, err := os.ReadFile(t.path)
	if err != nil {
		return err
	}
	var sums []tokenSum
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		right, token, admin := strings.Cut(line, " ")
		if !admin {
			token = right
		} else if right != "admin" {
			return fmt.Errorf("%s:%d: a line is a token, or \"admin TOKEN\"; %q is not a right", t.path, n, right)
		}
		token = strings.TrimSpace(token)
		if token == "" || strings.ContainsAny(token, " \t") {
			return fmt.Errorf("%s:%d: a token cannot hold spaces", t.path, n)
		}
		sums = append(sums, tokenSum{sha256.Sum256([]byte(token)), admin})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", t.path, err)
	}
	if len(sums) == 0 {
		return fmt.Errorf("%s: no token in it (one a line; # starts a comment)", t.path)
	}
	t.sums.Store(&sums)
	return nil
}

// Files are the files Reload reads.
func (t *Tokens) Files() []string { return []string{t.path} }

// Valid reports whether authorization, an Authorization header's or metadata's value,
// is "Bearer " and one of the tokens (the scheme's case does not matter).
func (t *Tokens) Valid(authorization string) bool {
	valid, _ := t.lookup(authorization)
	return valid
}

// Admin reports whether authorization is "Bearer " and a token of the admin right.
func (t *Tokens) Admin(authorization string) bool {
	_, admin := t.lookup(authorization)
	return admin
}

// lookup compares the presented token with every one, in constant time.
func (t *Tokens) lookup(authorization string) (valid, admin bool) {
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false, false
	}
	sum := sha256.Sum256([]byte(token))
	found, adm := 0, 0
	for _, s := range *t.sums.Load() {
		eq := subtle.ConstantTimeCompare(sum[:], s.sum[:])
		found |= eq
		if s.admin {
			adm |= eq
		}
	}
	return found == 1, adm == 1
}

// Handler serves h to requests that carry a valid token in their Authorization header,
// and answers 401 (application/problem+json, WWW-Authenticate: Bearer) to the others.
func (t *Tokens) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t.Valid(r.Header.Get("Authorization")) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="rlctl"`)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, `{"title": "Unauthorized", "status": 401, "detail": "this listener needs an Authorization: Bearer token (rlctl serve -auth-tokens)"}`)
	})
}

// GRPCOptions are the interceptors that end, with codes.Unauthenticated, every call
// whose metadata has no valid "authorization: Bearer <token>", except calls of the
// methods for which open reports true (full method names, /package.Service/Method).
func (t *Tokens) GRPCOptions(open func(method string) bool) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(t.unary(open)), grpc.ChainStreamInterceptor(t.stream(open))}
}

func (t *Tokens) unary(open func(string) bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := t.check(ctx, info.FullMethod, open); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

func (t *Tokens) stream(open func(string) bool) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := t.check(ss.Context(), info.FullMethod, open); err != nil {
			return err
		}
		return h(srv, ss)
	}
}

// check is nil for a call of an open method or one with a valid token.
func (t *Tokens) check(ctx context.Context, method string, open func(string) bool) error {
	if open != nil && open(method) {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t.Valid(v) {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "this service needs authorization: Bearer <token> metadata (rlctl serve -auth-tokens)")
}
