//go:build !race

package envoyconf

const raceEnabled = false
