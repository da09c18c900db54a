package main

import (
	"fmt"
	"os"

	"github.com/rlctl/rlctl/serve"
)

var cmdImport = &command{
	name:  "import",
	args:  "[-o FILE] FILE.yaml",
	short: "translate an envoyproxy/ratelimit configuration into an rlctl policy",
	long: `Import reads an envoyproxy/ratelimit configuration (a domain and its descriptors, YAML)
and prints an rlctl policy file that decides the descriptors rlctl serve receives from
Envoy as envoyproxy/ratelimit would: one policy for the domain, one fixed_window rule per
descriptor with a rate_limit, shadow_mode as shadow, envoyproxy/ratelimit's precedence of
a value over a wildcard over the key alone. Unlike envoyproxy/ratelimit, the rules of one
Envoy request's descriptors are charged together or not at all.

replaces and quota_mode have no equivalent: import refuses them, naming the descriptor.
detailed_metric, value_to_metric and rate_limit names change no decision and are dropped.

  -o FILE  write the policy to FILE instead of stdout

Exit status: 0 translated, 1 a configuration it cannot translate, 2 usage error.
`,
	run: func(e *env, args []string) error {
		fs := flags("import")
		out := fs.String("o", "", "")
		if err := parse(e, fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			fmt.Fprintln(e.stderr, "rlctl: error: import takes one envoyproxy/ratelimit configuration file")
			return errUsage
		}
		src, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
			return errFailed
		}
		policy, err := serve.ImportEnvoy(fs.Arg(0), src)
		if err != nil {
			fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
			return errFailed
		}
		if *out == "" {
			_, err = e.stdout.Write(policy)
			return err
		}
		if err := os.WriteFile(*out, policy, 0o644); err != nil {
			fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
			return errFailed
		}
		return nil
	},
}
