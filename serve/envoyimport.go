package serve

import "github.com/rlctl/rlctl/internal/envoyconf"

// ImportEnvoy translates one envoyproxy/ratelimit configuration file into an rlctl policy
// file (envoyconf.Import).
func ImportEnvoy(filename string, src []byte) ([]byte, error) {
	return envoyconf.Import([]envoyconf.File{{Name: filename, Src: src}}, envoyconf.Options{})
}
