package cluster

import "time"

// Timings of the ownership protocol (DESIGN.md §7, from the seed).
const (
	// TTL is how long a grant or renewal keeps a lease alive.
	TTL = 10 * time.Second
	// RenewEvery is the period of a node's batched renewal.
	RenewEvery = 3 * time.Second
	// Drain is how long a released entry still names the releasing node,
	// which keeps serving meanwhile and closes the database at its end.
	Drain = 500 * time.Millisecond
	// ForceGrantWait is how long a node waits after a connect failure to
	// the owner before re-reading the map.
	ForceGrantWait = 350 * time.Millisecond
	// ForceGrantQuietPeriod: the leader refuses to force-grant an entry
	// written more recently than this, so two nodes recovering from the
	// same dead owner cannot ping-pong the repo.
	ForceGrantQuietPeriod = time.Second
	// FollowerPoll is how often followers re-read the ownership map.
	FollowerPoll = 200 * time.Millisecond
	// PruneGrace is how long an entry stays in the map after its lease
	// lapsed: long enough that the repo's next claim usually finds it (and
	// placement its old owner's warm cache), short enough that the map
	// holds roughly the repositories used in the last hour.
	PruneGrace = time.Hour
	// PruneEvery is the period of the leader's pruning pass.
	PruneEvery = time.Minute
	// LeaderWait bounds how long a request that needs the leader (a claim,
	// a force-grant) waits for an unreachable one before answering 503
	// (RGIT_LEADER_WAIT_SECS): long enough to cover a leader pod's
	// restart (about 20 s), short enough that a client keeps its
	// connection.
	LeaderWait = 30 * time.Second
	// LeaderRetry is how often a node with requests waiting for an
	// unreachable leader asks it again (one heartbeat for all of them).
	LeaderRetry = 100 * time.Millisecond
	// StoreGrace is how long after its last landed commit the leader
	// still acknowledges session renewals it could not persist, the store
	// failing (RGIT_LEASE_STORE_GRACE_SECS; Horizon): warm repositories
	// keep being served through a store outage that long, and a new
	// leader process holds the sessions live at that commit until
	// StoreGrace+TTL after it.
	StoreGrace = time.Minute
)

// Timings parameterises the leader's map; DefaultTimings gives the
// constants above. Tests shrink or stretch them; production does not.
type Timings struct {
	TTL         time.Duration
	Drain       time.Duration
	QuietPeriod time.Duration
	// PruneGrace: entries lapsed longer than this are pruned; zero never
	// prunes by age (deleted repositories are still pruned).
	PruneGrace time.Duration
	// LeaderWait is the nodes' bound on waiting out an unreachable leader;
	// zero answers at once.
	LeaderWait time.Duration
	// StoreGrace bounds the renewals acknowledged without a durable write
	// (Horizon); zero: none.
	StoreGrace time.Duration
}

// DefaultTimings returns the production timings.
func DefaultTimings() Timings {
	return Timings{TTL: TTL, Drain: Drain, QuietPeriod: ForceGrantQuietPeriod, PruneGrace: PruneGrace, LeaderWait: LeaderWait,
		StoreGrace: StoreGrace}
}
