package luahost

import "github.com/rlctl/rlctl/internal/keyslot"

// setKeys starts a run's strict-key checks with KEYS keys.
func (r *runState) setKeys(keys []string) {
	r.keys = keys
	r.slotsKnown = false
}

// inDeclaredSlot reports whether key hashes to the cluster slot of one of the run's KEYS:
// a key that a Redis Cluster node serving those keys runs a script's command on. The
// slots of KEYS are computed once per run, when a run first asks.
func (r *runState) inDeclaredSlot(key string) bool {
	if !r.slotsKnown {
		r.slots = r.slots[:0]
		for _, d := range r.keys {
			r.slots = append(r.slots, keyslot.Of(d))
		}
		r.slotsKnown = true
	}
	s := keyslot.Of(key)
	for _, d := range r.slots {
		if d == s {
			return true
		}
	}
	return false
}
