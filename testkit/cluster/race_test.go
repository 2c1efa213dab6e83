//go:build race

package cluster

// defaultSeeds under the race detector: a randomized seed costs about 3.5
// times as much there (50 seeds: 7.6 s CPU against 2.3 s) and the
// Makefile's race run covers every concurrent package at once, so race
// builds run 50 seeds; the plain run (norace_test.go) covers CI's 200.
const defaultSeeds = 50
