package main

import (
	"fmt"
	"os"

	"github.com/rlctl/rlctl/internal/envoyconf"
)

var cmdImport = &command{
	name:  "import",
	args:  "[-o FILE] [-merge-domains] FILE.yaml...",
	short: "translate envoyproxy/ratelimit configurations into an rlctl policy",
	long: `Import reads envoyproxy/ratelimit configurations (each a domain and its descriptors, YAML)
and prints an rlctl policy file that decides the descriptors rlctl serve receives from
Envoy as envoyproxy/ratelimit would: a policy per domain, a fixed_window rule per
descriptor with a rate_limit, whose when selects exactly the descriptors
envoyproxy/ratelimit's lookup gives that limit (a value, then the first wildcard that
matches, then the key alone) and whose key gives each of its counters one counter, as its
cache keys do. shadow_mode is shadow; replaces names the rules of the limits it names;
unlimited is no rule. Unlike envoyproxy/ratelimit, the rules of one Envoy request's
descriptors are charged together or not at all.

The files are checked as envoyproxy/ratelimit checks them when it loads, each error at
its file:line:col. A domain in two files is an error, unless -merge-domains merges them
(envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG). quota_mode, requests_per_unit: 0 and an
unlimited limit's replaces have no equivalent yet: import refuses them, naming the
descriptor. Each rule's stats_key names its statistics as envoyproxy/ratelimit does
(detailed_metric, value_to_metric, share_threshold); metadata changes no decision and
is dropped.

  -o FILE          write the policy to FILE instead of stdout
  -merge-domains   merge the descriptors of files with the same domain

Exit status: 0 translated, 1 a configuration it cannot translate, 2 usage error.
`,
	run: func(e *env, args []string) error {
		fs := flags("import")
		out := fs.String("o", "", "")
		merge := fs.Bool("merge-domains", false, "")
		if err := parse(e, fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			fmt.Fprintln(e.stderr, "rlctl: error: import takes one or more envoyproxy/ratelimit configuration files")
			return errUsage
		}
		var files []envoyconf.File
		for _, name := range fs.Args() {
			src, err := os.ReadFile(name)
			if err != nil {
				fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
				return errFailed
			}
			files = append(files, envoyconf.File{Name: name, Src: src})
		}
		policy, err := envoyconf.Import(files, envoyconf.Options{MergeDomains: *merge})
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
