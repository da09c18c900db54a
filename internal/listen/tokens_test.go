package listen

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTokensValid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "# the edge proxies\n  s3cret-1  \n\nsecond\n#not-a-token\n")
	tok, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{"Bearer s3cret-1", true},
		{"bearer second", true},
		{"Bearer second ", false},
		{"Bearer s3cret", false},
		{"Bearer s3cret-12", false},
		{"Bearer #not-a-token", false},
		{"Bearer ", false},
		{"Basic s3cret-1", false},
		{"s3cret-1", false},
		{"", false},
	} {
		if got := tok.Valid(c.header); got != c.ok {
			t.Errorf("Valid(%q) = %v, want %v", c.header, got, c.ok)
		}
	}
}

// A line "admin TOKEN" gives its token the admin right too; the others have the plain
// right only.
func TestTokensAdmin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "edge-proxy\nadmin  ops-key \n")
	tok, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		header       string
		valid, admin bool
	}{
		{"Bearer edge-proxy", true, false},
		{"Bearer ops-key", true, true},
		{"Bearer admin", false, false},
		{"Bearer admin ops-key", false, false},
		{"", false, false},
	} {
		if got := tok.Valid(c.header); got != c.valid {
			t.Errorf("Valid(%q) = %v, want %v", c.header, got, c.valid)
		}
		if got := tok.Admin(c.header); got != c.admin {
			t.Errorf("Admin(%q) = %v, want %v", c.header, got, c.admin)
		}
	}
}

func TestTokensFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, text, err string }{
		{"empty", "", "no token in it"},
		{"comments", "# only\n\n", "no token in it"},
		{"space", "a\nb c\n", `tokens:2: a line is a token, or "admin TOKEN"; "b" is not a right`},
		{"admin spaces", "admin a b\n", "tokens:1: a token cannot hold spaces"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "tokens")
			writeFile(t, path, c.text)
			if _, err := LoadTokens(path); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("LoadTokens: %v, want %q", err, c.err)
			}
		})
	}
	if _, err := LoadTokens(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadTokens of a missing file: no error")
	}
}

// TestTokensReload: a reload replaces the tokens; one of a file that holds none, or is
// gone, keeps them.
func TestTokensReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "old\n")
	tok, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "new\n")
	if err := tok.Reload(); err != nil || tok.Valid("Bearer old") || !tok.Valid("Bearer new") {
		t.Fatalf("after a reload: %v, old %v, new %v", err, tok.Valid("Bearer old"), tok.Valid("Bearer new"))
	}
	writeFile(t, path, "")
	if err := tok.Reload(); err == nil || !tok.Valid("Bearer new") {
		t.Fatalf("an empty file: %v, and the tokens kept: %v", err, tok.Valid("Bearer new"))
	}
	os.Remove(path)
	if err := tok.Reload(); err == nil || !tok.Valid("Bearer new") {
		t.Fatalf("a missing file: %v, and the tokens kept: %v", err, tok.Valid("Bearer new"))
	}
}

func TestTokensHandler(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "t1\n")
	tok, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	h := tok.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for _, c := range []struct {
		auth string
		code int
	}{{"Bearer t1", http.StatusTeapot}, {"Bearer t2", 401}, {"", 401}} {
		r := httptest.NewRequest("POST", "/v1/decide", nil)
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code {
			t.Errorf("Authorization %q: %d, want %d", c.auth, w.Code, c.code)
		}
		if c.code == 401 && (w.Header().Get("WWW-Authenticate") == "" || w.Header().Get("Content-Type") != "application/problem+json") {
			t.Errorf("a 401's headers: %v", w.Header())
		}
	}
}

func TestTokensGRPC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "t1\n")
	tok, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	unary := tok.unary(func(m string) bool { return m == "/open/Method" })
	for _, c := range []struct {
		method, auth string
		code         codes.Code
	}{
		{"/closed/Method", "Bearer t1", codes.OK},
		{"/closed/Method", "Bearer t2", codes.Unauthenticated},
		{"/closed/Method", "", codes.Unauthenticated},
		{"/open/Method", "", codes.OK},
	} {
		ctx := context.Background()
		if c.auth != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", c.auth))
		}
		_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: c.method}, func(context.Context, any) (any, error) { return nil, nil })
		if status.Code(err) != c.code {
			t.Errorf("%s with %q: %v, want %v", c.method, c.auth, err, c.code)
		}
	}
}

// BenchmarkTokensValid: the check every call pays with -auth-tokens, at 16 tokens.
func BenchmarkTokensValid(b *testing.B) {
	path := filepath.Join(b.TempDir(), "tokens")
	var lines []string
	for i := range 16 {
		lines = append(lines, fmt.Sprintf("token-%02d-%s", i, strings.Repeat("x", 32)))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		b.Fatal(err)
	}
	tok, err := LoadTokens(path)
	if err != nil {
		b.Fatal(err)
	}
	header := "Bearer " + lines[15]
	b.ReportAllocs()
	for b.Loop() {
		if !tok.Valid(header) {
			b.Fatal("refused")
		}
	}
}
