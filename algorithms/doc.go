// Package algorithms is the registry of rlctl's rate-limiting algorithms and the wire
// contract of the engine script that runs them.
//
// Every algorithm is a Lua file written to one contract (see lua/dispatch.lua): check
// performs no writes and returns allowed, remaining, retry-after, reset-after and limit;
// commit applies the charge with a TTL; refund, when present, undoes one. A built-in's
// check, when it allows a charge, also returns the remaining and reset-after a peek would
// report, which a denied stack reports for the rule without checking it again. Assemble joins
// a prelude, the algorithms and the dispatcher into one script with a stable SHA1, so a
// request's stacked rules are decided in one atomic call, all or nothing. A compiled rule of
// the five core built-ins gets a check and commit of its own, straight-line Lua with its
// parameters written in, held to its algorithm's file by a differential test (fast.go).
//
// Every algorithm also declares its worst case on Redis ([Complexity], [Work]): the commands
// one call may issue and the elements they may touch, and the entries and bytes one key may
// hold, from a rule's parameters and its smallest cost. Memory comes from [KeyMemory], a
// bound on what MEMORY USAGE reports; dsl holds every rule to a budget with these figures.
//
// The package also holds a pure-Go reference model of each built-in algorithm. The models
// restate the maths with exact rational arithmetic; they exist only as an oracle for tests
// and must never be used to make decisions.
//
// Units: time is an integer number of microseconds everywhere on the wire; counts are
// integers. Parameters are validated here so that no product the Lua forms exceeds 2^53,
// the range in which Lua's doubles hold integers exactly.
package algorithms
