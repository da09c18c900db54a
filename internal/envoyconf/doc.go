// Package envoyconf reads envoyproxy/ratelimit configurations and translates them into
// rlctl policies that decide Envoy's descriptors as envoyproxy/ratelimit does.
//
// [Parse] reads one YAML file (a domain and its descriptor tree) and checks it as
// envoyproxy/ratelimit checks it when it loads, with every error at its file:line:col.
// [Import] translates one or more parsed files into one policy file: a policy per domain,
// a fixed_window rule per descriptor with a rate_limit, whose when selects exactly the
// descriptors envoyproxy/ratelimit's lookup gives that limit, and whose key partitions
// them into counters exactly as its cache keys do.
//
// # Matching
//
// envoyproxy/ratelimit walks a descriptor's entries down the tree. At each level it takes
// the entry of the same key whose value is the entry's value, else the first wildcard
// entry, in the order the configuration lists them, whose value matches (a '*' matches
// any run of characters, anywhere in the value), else the entry of the key with no value.
// The limit applies when the walk ends on a node with a rate_limit exactly at the
// descriptor's last entry. A rule's when says the same: the descriptor's keys
// (request.descriptor), and at each position the value test of its node, with the values
// and earlier wildcards that win over it excluded.
//
// Its cache key is the domain and every entry's key and value (a share_threshold
// wildcard's pattern in place of the value), so a rule's key is the values its path leaves
// open (those of entries with no value, and of wildcards without share_threshold); rlctl
// keys are injective in them.
//
// # What differs
//
// envoyproxy/ratelimit looks an entry up by its key and value joined with '_', so an
// entry ("a", "b_c") finds a configuration's ("a_b", "c"), and a '*' in a key is a
// wildcard; rlctl compares keys and values apart, and a key as written. Keys and values
// in the wrong place of the YAML (which envoyproxy/ratelimit accepts and ignores) are
// errors here, so that a setting meant is not silently dropped.
package envoyconf
