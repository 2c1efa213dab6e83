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
//
// Map hygiene: an entry leaves the map when its lease lapsed more than
// PruneGrace ago, or when it lapsed and its repository was deleted
// (Map.Prune). Epochs must still never go backwards for a repo: a node
// holding a stale lease notices it lost the repo by seeing a higher epoch,
// and a regranted epoch 1 after a prune would look older than the epoch 4
// it holds. So the map keeps one epoch floor (FloorKey), the highest epoch
// it ever pruned, written in the same transaction as the removals, and
// every grant takes max(entry's epoch, floor)+1. A pruned repo's last
// epoch is at most the floor, so its next grant is above it; an entry
// that survives is unaffected except that it, too, climbs above the
// floor. The floor costs one key, whatever the map's history.
package cluster
