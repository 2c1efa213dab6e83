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
// (0.990 against 0.500 on 5), and 0.680 against 0.500 while the restart
// is in progress (0.828 against 0.561 on 5; measured again with the
// ServeLease below, which changed only the 5-node figures, from 0.510,
// 0.856 and 0.567). The cost is one forwarding hop on the first request
// for a cold repository that entered elsewhere.
// Before the draining leader handed its repositories over (HandOver, for
// availability while it restarts) the rates were 1.000 and 0.850 on 3
// nodes: a handed-over repository served by its second-choice node stays
// there.
//
// Steering places a repository only when it is claimed cold; the
// leader's Rebalancer moves warm ones toward the same placement, through
// a release and a drain, a few at a time (rebalance.go).
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
//  3. A lapsed session is never renewed: its entries may have been
//     granted to others since, and the renewal's acknowledgement would
//     extend the node's ServeLease over them. The renewal is declined, and
//     the node closes everything and opens a new session.
//  4. A node never loses a repository bound to its live session: claims
//     and force-grants take a bound entry only once its session lapsed
//     (ForceAt). After each heartbeat the node still checks what it holds
//     against its map view and closes a repository granted since under a
//     higher epoch to another node or session (Lost). The map itself
//     never names two owners: it is one entry per repository, written by
//     one leader, and epochs only grow.
//  5. Steered grants, which a node did not ask for, stay per-repository
//     leases until the node claims the repository (which binds it): a
//     live session must not keep an entry alive that its node never
//     serves. Hand-overs are bound at once, so that the receiver may serve
//     them while the leader restarts (ServeLease); they hold only what the
//     draining leader had open.
//  6. The quiet period counts from the entry's own Written (grant or
//     release), not from session renewals; two recovering nodes cannot
//     ping-pong a repository, since the force-grant names the dead owner
//     and the first one rebinds the entry to itself. For an entry bound to
//     a session, the session's lapse bounds the force-grant as well
//     (ForceAt, below).
//
// # Reads (no stale read from a former owner)
//
// A node serves a repository, reads and writes alike, only while it holds
// it under its current session and the leader acknowledged a renewal of
// that session the node sent less than TTL-ServeMargin ago by its own
// clock (ServeLease; the repo actor checks it on every request, and a
// claim that waits for an unreachable leader adopts the map's grant only
// under it). The leader, for its part, renews a session only while it is
// live (3), and takes an entry bound to it only once it lapsed, a TTL
// after the last renewal by the leader's clock (Claim; ForceAt for
// force-grants, which therefore move a dead owner's repository a TTL
// after its last heartbeat rather than after the quiet period alone).
// The leader renewed no earlier than the node sent, so if the node's
// clock runs no more than ServeMargin (a tenth) slower than the leader's,
// the node stops serving before anyone else can be granted the
// repository, whatever the network delays: a read or a compare-and-swap
// refused as stale is never answered from a former owner's state, and
// every history of reads and pushes is linearizable (testkit/cluster
// TestRandomized checks it). Per-repository leases (steered grants) are
// never served: the node claims them first, which binds them. The price
// is availability: a node that cannot renew for TTL-ServeMargin (9 s),
// because of a partition or a leader restart, serves nothing until the
// leader answers again. The leader's successive processes must agree on
// wall-clock time to within the margin as well, since a session's expiry
// is stored as a wall time and read by the next leader.
//
// # Store outages (renewals acknowledged from memory)
//
// The map lives in the store, so while the store hangs or fails the
// leader cannot persist renewals, and under the rules above every owner
// would stop serving TTL-ServeMargin after its last persisted one. The
// leader instead acknowledges a session renewal whose write failed or has
// not landed within a second (actors/leaderoutage.go), and only that:
// claims, releases, grants, force-grants and moves still need a durable
// write (cold repositories answer 503, pushes fail, the rebalancer
// pauses). The argument keeps every rule above:
//
//  7. Only a renewal of a session that is current and live at its
//     decision, in the leader's memory, is acknowledged (RenewUnpersisted
//     runs RenewSession: rules 2 and 3), and the renewed expiry is kept in
//     memory (Unpersisted) across the reloads of the map that failed
//     writes cause, so claims, force-grants and the rebalancer on this
//     leader see the session live until the acknowledged expiry (rule 4).
//     Every commit persists those sessions, and they leave memory once
//     one has.
//  8. A leader process acknowledges from memory only renewals it decided
//     before its Horizon: the composition time of its last landed commit
//     plus Timings.StoreGrace (RGIT_LEASE_STORE_GRACE_SECS, 60 s). Every
//     commit writes its horizon (HorizonKey). So after its last commit,
//     at Since, the process acknowledged from memory only renewals
//     decided in [Since, Until), each giving at most Until+TTL, and only
//     of sessions live at Since in the database (a session renewed from
//     memory was live at its first such renewal, decided after Since, by
//     a record that commit left).
//  9. A new leader process (rgit-0 restarted: it opens the database and
//     so fences its predecessor) reads the horizon and holds every
//     session live at Since until at least Until+TTL (Horizon.Floor)
//     before granting an entry bound to it elsewhere. A session lapsed at
//     Since stays lapsed: the predecessor may have granted its entries to
//     others since. The leader node's own session is not held: its
//     acknowledgements went to the predecessor process, gone (rule 2).
//     A drained leader (SIGTERM) writes a horizon ending at once, so a
//     clean restart holds nothing.
//
// The cost is after a leader process dies without draining (kill -9, a
// crash, the node lost), outage or not, since every commit moves the
// horizon: a node that died with it (its session still live at the
// leader's last commit) has its repositories force-granted up to
// StoreGrace+TTL (70 s) after that commit instead of a TTL after its own
// last heartbeat;
// requests for them wait (LeaderWait) or answer 503 meanwhile. A node
// still running renews with the new leader as before. With StoreGrace 0
// the horizon allows nothing and the floor holds nothing: the behaviour
// before. A store outage longer than StoreGrace ends the acknowledgements
// at the horizon, and nodes stop serving TTL-ServeMargin later, as
// without it. Routing follows: a node's view of the map stops with the
// store, so an entry naming another node that was live when the view was
// last current is forwarded to even once it looks lapsed (Locate).
//
// Within these timing assumptions no two nodes are granted one repository
// under overlapping leases; and no acknowledged write is lost in any
// case, because acknowledgement requires a durable commit under the
// repository's fence.
package cluster
