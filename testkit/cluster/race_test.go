//go:build race

package cluster

// raceEnabled: the race detector makes a randomized seed several times
// slower, so race builds run raceSeeds (TestRandomized).
const (
	raceEnabled = true
	raceSeeds   = 50
)
