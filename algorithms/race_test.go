//go:build race

package algorithms

const raceEnabled = true
