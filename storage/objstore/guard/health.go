package guard

import "time"

// State is the store's health as this node sees it from its own requests.
type State uint8

const (
	// Healthy: the last request the store answered succeeded.
	Healthy State = iota
	// Degraded: recent requests failed, fewer than Policy.DownAfter in a
	// row; every request still goes to the store.
	Degraded
	// Down: Policy.DownAfter requests in a row failed. Requests fail fast
	// without reaching the store; probes (see Probe) still go, one per
	// Policy.TrialEvery, and the first success makes the store Healthy
	// again.
	Down
)

var stateNames = [...]string{Healthy: "healthy", Degraded: "degraded", Down: "down"}

func (s State) String() string { return stateNames[s] }

// States lists every state (metrics export one series each).
var States = []State{Healthy, Degraded, Down}

// Policy sets when the store counts as down and how often it is tried
// while it is.
type Policy struct {
	// DownAfter is how many failures in a row make the store Down.
	DownAfter int
	// TrialEvery is the least time between two probes let through to a
	// store that is Down: it bounds the load an outage puts on the store
	// and, with the prober's pace, how long the node takes to notice its
	// return.
	TrialEvery time.Duration
}

// DefaultPolicy: down after three failures in a row, tried once a second.
var DefaultPolicy = Policy{DownAfter: 3, TrialEvery: time.Second}

// Health is what the decisions below work on. The zero value is Healthy.
type Health struct {
	State State
	// Fails counts failures since the last success.
	Fails int
	// Since is when State was entered.
	Since time.Time
	// NextTrial is, while Down, the earliest time the next probe may go
	// to the store.
	NextTrial time.Time
}

// Observe folds the outcome of one request the store was sent into h.
//
//	state     outcome  next
//	any       ok       Healthy (Fails 0)
//	Healthy   fail     Degraded, or Down if Fails reaches DownAfter
//	Degraded  fail     Degraded, or Down if Fails reaches DownAfter
//	Down      fail     Down (Since unchanged)
//
// Entering Down schedules the first trial TrialEvery later.
func Observe(h Health, ok bool, now time.Time, p Policy) Health {
	if ok {
		if h.State != Healthy {
			return Health{State: Healthy, Since: now}
		}
		h.Fails = 0
		return h
	}
	h.Fails++
	next := Degraded
	if h.Fails >= max(p.DownAfter, 1) {
		next = Down
	}
	if next == h.State {
		return h
	}
	h.State, h.Since = next, now
	if next == Down {
		h.NextTrial = now.Add(p.TrialEvery)
	}
	return h
}

// Admit decides whether a request may go to the store now. Healthy and
// Degraded admit everything. Down admits a probe once NextTrial has
// passed, and moves NextTrial on by TrialEvery; everything else fails
// fast, so no client request waits on a store known to be down.
//
//	state     request  probe
//	Healthy   yes      yes
//	Degraded  yes      yes
//	Down      no       if now ≥ NextTrial (NextTrial = now+TrialEvery)
func Admit(h Health, now time.Time, p Policy, probe bool) (Health, bool) {
	if h.State != Down {
		return h, true
	}
	if !probe || now.Before(h.NextTrial) {
		return h, false
	}
	h.NextTrial = now.Add(p.TrialEvery)
	return h, true
}
