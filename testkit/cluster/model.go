package cluster

import (
	"math"
	"time"

	rc "github.com/rgit/rgit/cluster"
)

// The capacity model of the lease plane (docs/capacity.md, "The model"):
// each function is one formula of that page, so that what MeasureCapacity
// measures is compared with what the page predicts, not with a fit.

// Figures are the model's measured inputs (docs/capacity.md, "The
// measured inputs", from `rgit-bench cluster -lease-only`).
type Figures struct {
	// Write is one store write, the leader's commit of a batch
	// (op=store-write).
	Write time.Duration
	// ClaimCPU is the leader's CPU time per claim, from op=claim at
	// concurrency 512 (zero in fake time, where CPU costs nothing).
	ClaimCPU time.Duration
	// RenewBytes is what one heartbeat's session record adds to the map's
	// log (op=renew bytes_written before the horizon record).
	RenewBytes int
	// HorizonBytes is what the renewal horizon (cluster.HorizonKey),
	// written with every commit of the leader, adds to it.
	HorizonBytes int
}

// ClaimsPerSec is the leader's claim rate with c claims always waiting:
// one batch in flight at a time, each carrying the c claims that waited
// for it, so c per Write plus the CPU of deciding them,
// c / (Write + c·ClaimCPU); it saturates at 1/ClaimCPU.
func (f Figures) ClaimsPerSec(c int) float64 {
	return float64(c) / (f.Write + time.Duration(c)*f.ClaimCPU).Seconds()
}

// ClaimTime is how long repos claims take, c at once from the start: the
// first finds the leader idle and is written alone, then each write
// carries the c that waited for it.
func (f Figures) ClaimTime(repos, c int) time.Duration {
	waves := 1 + math.Ceil(float64(repos-1)/float64(c))
	return time.Duration(waves * float64(c) / f.ClaimsPerSec(c) * float64(time.Second))
}

// RenewWrites is the map writes of one renewal round (RenewEvery) of n
// nodes whose heartbeats are spread over the round: one each, but no
// more than one write in flight at a time, so at most RenewEvery/Write;
// heartbeats that arrive while a write is in flight share the next one.
func (f Figures) RenewWrites(n int) float64 {
	return math.Min(float64(n), rc.RenewEvery.Seconds()/f.Write.Seconds())
}

// RenewBytesPerRound is what one renewal round of n nodes writes to the
// map's log: a session record each, whatever they hold, and the horizon
// once a write (RenewWrites).
func (f Figures) RenewBytesPerRound(n int) float64 {
	return float64(n*f.RenewBytes) + f.RenewWrites(n)*float64(f.HorizonBytes)
}

// ServeAll is how long c requesters, each serving one cold repository
// after another, take to serve repos of them when one alone takes one on
// n nodes. The leader batches their claims, so they run side by side,
// but in the storm a claim always finds a write in flight and waits for
// it to land before its own is written; alone it found one only as often
// as the heartbeats of n nodes kept the leader writing (LeaderBusy). So a
// request costs one plus a Write per claim (ClaimsPerRequest) for the
// part of the time the leader was idle, unless the leader's claim rate
// is the bound.
func (f Figures) ServeAll(repos, c, n int, one time.Duration) time.Duration {
	wait := ClaimsPerRequest(n) * float64(f.Write) * (1 - f.LeaderBusy(n))
	req := one + time.Duration(wait)
	byRequesters := time.Duration(math.Ceil(float64(repos)/float64(c))) * req
	if f.ClaimCPU == 0 {
		return byRequesters
	}
	byLeader := time.Duration(float64(repos) * ClaimsPerRequest(n) / f.ClaimsPerSec(c) * float64(time.Second))
	return max(byRequesters, byLeader)
}

// LeaderBusy is the part of the time the leader has a write in flight
// for the heartbeats of n nodes alone: RenewWrites a round, a Write each.
func (f Figures) LeaderBusy(n int) float64 {
	return math.Min(1, f.RenewWrites(n)*f.Write.Seconds()/rc.RenewEvery.Seconds())
}

// ClaimsPerRequest is the claims a request for a cold repository makes
// when it enters at a random one of n nodes with steering on: the entry
// node's, which the leader grants to the repository's winner, and the
// winner's own, which binds it to its session; one when the entry node
// is the winner.
func ClaimsPerRequest(n int) float64 { return 2 - 1/float64(n) }

// ScaleOutMoves is how many of repos change their rendezvous winner when
// added nodes join n of equal weight: each new node wins its share,
// repos·added/(n+added).
func ScaleOutMoves(repos, n, added int) float64 {
	return float64(repos) * float64(added) / float64(n+added)
}

// MoveTime is one rebalancing move: it starts at a round, waits for the
// target's heartbeat (prewarm) and then the holder's (release), half a
// renewal period each on average, drains, and is handed over at the next
// round: RenewEvery + Drain + RebalanceEvery. An upper bound: the rounds
// overlap some of these waits (3.8 s measured at 50 nodes).
func MoveTime() time.Duration { return rc.RenewEvery + rc.Drain + rc.RebalanceEvery }

// ScaleOutTime is how long moves take at inFlight at once.
func ScaleOutTime(moves float64, inFlight int) time.Duration {
	return time.Duration(math.Ceil(moves/float64(inFlight))) * MoveTime()
}
