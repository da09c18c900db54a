package envoyconf

import "strings"

// statsKey is the stats_key of the rule of path, as an HCL expression: the name
// envoyproxy/ratelimit gives the limit's statistics, the domain and each node's key or
// key_value joined by '.' (config_impl.go's newParentKey).
func statsKey(domain string, path []step, keys []string) string {
	parts := []string{domain}
	for _, s := range path {
		parts = append(parts, s.node.finalKey())
	}
	return quote(strings.Join(parts, "."))
}
