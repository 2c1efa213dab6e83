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
//
// # Node sessions (renewal cost independent of the leases held)
//
// Renewal is per node, as etcd binds keys to a lease: a node opens a
// Session with the leader when it starts (before its first claim), every
// entry granted to it on its own request is bound to that session
// (Entry.Session), and its heartbeat every RenewEvery renews the session
// alone — one small record, "sess/{node}", whatever the node holds. A
// bound entry's expiry is its session's, capped by the drain end a
// release sets (Entry.Until); Bind computes it from the two records, so
// the leader's map and every follower's view read the same liveness from
// the same log. Releases, force-grants, claims and epochs stay per entry.
//
// The argument that this is as safe as per-entry renewal:
//
//  1. An entry is live only while its session is live: Bind gives a bound
//     entry no expiry later than its session's, and the session's expiry
//     moves only through RenewSession, a leader decision persisted (in
//     the same log as the entries) before the node hears of it. So a node
//     that stops renewing loses all its entries when its session lapses,
//     exactly when per-entry renewals stopped in the same heartbeat would
//     have lost them (both move every lease by TTL from the same
//     heartbeat), and anyone's claim is then granted with a new epoch.
//  2. A node's incarnations never share a session: a starting node opens
//     a new one (ID+1), which ends the previous one at once (its entries
//     read as lapsed when the new one started). A renewal naming the old
//     ID — a late message from before the restart — is declined and
//     writes nothing; the node that sent it (if it still runs) closes
//     every repository and opens a new session. A claim waits for the
//     open (Node.ensureSession), so it never binds to the incarnation
//     the open then ends.
//  3. Renewing a lapsed session revives only entries still bound to it,
//     which nobody was granted since (a grant rebinds the entry to the new
//     owner's session, with a higher epoch): the same rule as renewing an
//     expired per-entry lease that still names the node.
//  4. Losing one repository while the session lives (a force-grant after
//     connect failures, a claim after the session lapsed and came back)
//     is noticed without the leader listing it: after each heartbeat the
//     node checks what it holds against its map view, and a repository
//     granted since under a higher epoch to another node or session is
//     closed at once (Lost). Until then — as between per-entry renewals —
//     the old holder may still serve reads; its writes are refused by the
//     repository database's fence, which the new owner's open raised. The
//     map itself never names two owners: it is one entry per repository,
//     written by one leader, and epochs only grow.
//  5. Grants a node did not ask for (steered, handed over) stay
//     per-repository leases until the node opens the repository and lists
//     it in a heartbeat, which binds it: a live session must not keep an
//     entry alive that its node never serves.
//  6. The quiet period counts from the entry's own Written (grant or
//     release), not from session renewals, so a dead owner's repository
//     moves on the connect-failure path within ForceGrantWait instead of
//     waiting for a renewal's quiet second; two recovering nodes still
//     cannot ping-pong it, since the force-grant names the dead owner and
//     the first one rebinds the entry to itself.
//
// Within the timing assumptions (clocks on the leader and the nodes run at
// the same rate; a node that cannot renew for TTL stops being named by the
// leader), no two nodes are granted one repository under overlapping
// leases except through a force-grant, which only the connect-failure path
// asks for; and no acknowledged write is lost in any case, because
// acknowledgement requires a durable commit under the repository's fence.
package cluster
