package node

import (
	"time"
)

// TrafficState is a node's lifecycle state as load balancers and the
// rollout gate see it (docs/operations.md: deployment).
type TrafficState uint8

const (
	// Joining: started, but without a fresh view of the ownership map
	// (the leader: not loaded) or with its start-up prewarm running.
	// /ready is 503 and the node claims nothing.
	Joining TrafficState = iota
	// Serving: /ready is 200.
	Serving
	// Draining: SIGTERM received; /ready is 503, leases are released
	// through the drain, listeners drain.
	Draining
)

var trafficNames = [...]string{Joining: "joining", Serving: "serving", Draining: "draining"}

func (s TrafficState) String() string { return trafficNames[s] }

// freshMap is the oldest map view a joining node accepts: a few follower
// polls (cluster.FollowerPoll), so a node that cannot read the map stays
// out of the load balancer.
const freshMap = 2 * time.Second

// trafficIn is what the traffic state is decided from.
type trafficIn struct {
	started   bool // every listener is bound
	draining  bool
	served    bool // the node has been serving (the state is latched)
	cluster   bool
	mapOK     bool          // the node has a view of the ownership map
	mapAge    time.Duration // its age
	prewarmed bool          // the start-up prewarm finished (or had nothing to do)
}

// trafficState decides the node's state. Serving is latched: a serving
// node whose map view goes stale (a store outage) keeps serving what it
// holds rather than leaving every load balancer at once; joining is for
// start-up only.
func trafficState(in trafficIn) TrafficState {
	switch {
	case in.draining:
		return Draining
	case in.served:
		return Serving
	case !in.started || !in.prewarmed:
		return Joining
	case in.cluster && (!in.mapOK || in.mapAge > freshMap):
		return Joining
	}
	return Serving
}
