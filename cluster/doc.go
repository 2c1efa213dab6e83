// Package cluster holds the pure decisions of rgit's cluster: ownership map
// entries, lease grants, renewals, releases and force-grants, routing and
// placement. Functions take explicit state, message and time and return a
// decision; they do no I/O and read no clock, so the testkit drives them
// deterministically. It may import storage/ types only.
//
// Placement (seed 003): the leader tracks which nodes are live (Liveness:
// heard within the TTL, not left since) and, with Options.Steer, grants a
// cold repository to its weighted rendezvous winner among them, so a
// repository returns to the node whose pack cache is warm. Steering is on
// by default because it was measured (testkit/cluster
// TestPlacementRollingRestart: 200 repos, a rolling restart with traffic,
// a pack cache that survives restarts, seed 1): the cache hit rate after
// the restart is 0.925 with steering against 0.525 without on 3 nodes
// (0.990 against 0.510 on 5), and 0.680 against 0.500 while the restart
// is in progress (0.856 against 0.567 on 5). The cost is one forwarding
// hop on the first request for a cold repository that entered elsewhere.
// Before the draining leader handed its repositories over (HandOver, for
// availability while it restarts) the rates were 1.000 and 0.850 on 3
// nodes: a handed-over repository served by its second-choice node stays
// there.
package cluster
