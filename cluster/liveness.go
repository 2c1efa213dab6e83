package cluster

import (
	"sort"
	"time"
)

// SettleTime is how long a freshly started leader waits before it trusts
// its Liveness: every live node sends a renewal batch every RenewEvery, so
// after one period (plus slack for a slow batch) each has been heard.
// Steering earlier would pile every cold repo onto the few nodes heard
// first.
const SettleTime = RenewEvery + time.Second

// Liveness is the leader's record of which nodes are live, for placement.
// A node is live when it was heard from (a claim, a renewal batch, a
// force-grant request) within the TTL and has not left since; the leader
// itself is live unless it left (it is draining). Nodes send a renewal batch every RenewEvery even
// when they hold nothing, so an idle node stays live. Not safe for
// concurrent use; the leader actor owns it.
type Liveness struct {
	self    string
	ttl     time.Duration
	started time.Time
	weights map[string]float64
	heard   map[string]time.Time
	// selfLeft: the leader released a lease and has not been heard since.
	selfLeft bool
}

// NewLiveness starts tracking at now for leader self. weights maps a node
// to its placement weight; nodes not in it weigh 1, and a weight that is
// not a positive finite number keeps the node out of placement (it still
// serves what it claims itself).
func NewLiveness(self string, ttl time.Duration, weights map[string]float64, now time.Time) *Liveness {
	w := make(map[string]float64, len(weights))
	for n, v := range weights {
		w[n] = v
	}
	return &Liveness{self: self, ttl: ttl, started: now, weights: w, heard: make(map[string]time.Time)}
}

// Heard records a message from node at now.
func (l *Liveness) Heard(node string, now time.Time) {
	if node == l.self {
		l.selfLeft = false
	}
	if prev, ok := l.heard[node]; !ok || now.After(prev) {
		l.heard[node] = now
	}
}

// Left takes node out of placement until it is heard from again: it
// released a lease (a draining node releases everything and then stops
// renewing; an idle release costs at most one renewal period out of
// placement) or another node could not reach it. Steering a repo to a
// draining or dead node would cost the requester a 503 or a force-grant.
func (l *Liveness) Left(node string) {
	if node == l.self {
		l.selfLeft = true
	}
	delete(l.heard, node)
}

// Settled reports whether the leader has run long enough (SettleTime) for
// every live node to have been heard.
func (l *Liveness) Settled(now time.Time) bool { return now.Sub(l.started) >= SettleTime }

// Live returns the live nodes at now, sorted by name, with their weights.
func (l *Liveness) Live(now time.Time) LiveSet {
	var out LiveSet
	if !l.selfLeft {
		out = append(out, NodeWeight{Node: l.self, Weight: l.weight(l.self)})
	}
	for n, at := range l.heard {
		if n != l.self && now.Sub(at) < l.ttl {
			out = append(out, NodeWeight{Node: n, Weight: l.weight(n)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Options returns the claim options at now: steering as asked, but only
// once Settled.
func (l *Liveness) Options(steer bool, now time.Time) Options {
	return Options{Steer: steer && l.Settled(now)}
}

func (l *Liveness) weight(node string) float64 {
	if w, ok := l.weights[node]; ok {
		return w
	}
	return 1
}

// Weighted returns nodes with their placement weights.
func (l *Liveness) Weighted(nodes []string) LiveSet {
	out := make(LiveSet, len(nodes))
	for i, n := range nodes {
		out[i] = NodeWeight{Node: n, Weight: l.weight(n)}
	}
	return out
}
