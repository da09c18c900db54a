package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/internal/redistest"
)

// TestRuntimeCommandsOnACluster: override, list and inspect with -redis-type cluster
// change and read a real 3-node Redis Cluster, each key's override and list members in
// its slot, and their list and show scan every master.
func TestRuntimeCommandsOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	dir := t.TempDir()
	policy := filepath.Join(dir, "api.hcl")
	if err := os.WriteFile(policy, []byte(`
policy "api" {
  rule "per_user" {
    algorithm   = "gcra"
    key         = request.user
    rate        = "10/s"
    burst       = 10
    overridable = true
    deny        = list("banned")
  }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rlctl := func(args ...string) string {
		t.Helper()
		var out, errs bytes.Buffer
		args = append(args, policy)
		if code := run(args, &env{stdout: &out, stderr: &errs}); code != 0 {
			t.Fatalf("rlctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errs.String())
		}
		return out.String()
	}
	redis := []string{"-redis", cl.Addrs()[0], "-redis-type", "cluster"}
	users := []string{"u1", "u2", "u3", "u4", "u5", "u6"} // keys in several slots, on several masters
	for _, u := range users {
		rlctl(append([]string{"list", "add", "-list", "banned", "-attr", "user=" + u}, redis...)...)
		rlctl(append([]string{"override", "set", "-rule", "api.per_user", "-set", "burst=50", "-attr", "user=" + u}, redis...)...)
	}
	show := rlctl(append([]string{"list", "show"}, redis...)...)
	overrides := rlctl(append([]string{"override", "list"}, redis...)...)
	for _, u := range users {
		key := "rl:{api:per_user:gcra:" + u + "}"
		if !strings.Contains(show, "banned  "+key+"\n") {
			t.Errorf("list show lacks %s:\n%s", key, show)
		}
		if !strings.Contains(overrides, key) {
			t.Errorf("override list lacks %s:\n%s", key, overrides)
		}
	}
	in := rlctl(append([]string{"inspect", "-attr", "user=u4"}, redis...)...)
	if !strings.Contains(in, "on banned") || !strings.Contains(in, "burst=50") || !strings.Contains(in, "denied") {
		t.Errorf("inspect:\n%s", in)
	}
}
