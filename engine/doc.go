// Package engine decides requests by running the rlctl engine script on a Backend: Redis
// in production, or luahost in-process (embedded mode, the local fallback, simulations).
// Both run the identical script (algorithms.Default or a plugin assembly).
package engine
