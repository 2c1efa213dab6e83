//go:build !race

package cluster

// defaultSeeds is how many seeds TestRandomized runs without
// RGIT_CLUSTER_SEEDS: CI's minimum of 200 (fewer under -race, see
// race_test.go).
const defaultSeeds = 200
