package cluster

import (
	"fmt"
	"sort"
	"time"
)

// Outcome is what the leader decided about one request.
type Outcome uint8

const (
	// Refused: nothing changed; Decision.Owner names the current owner
	// (forward there) or is empty.
	Refused Outcome = iota
	// Granted: a new lease, with a bumped epoch, for Decision.Owner.
	Granted
	// Extended: Decision.Owner already held the lease; its expiry moved.
	Extended
	// Released: the entry was shortened to the drain.
	Released
)

var outcomeNames = [...]string{Refused: "refused", Granted: "granted", Extended: "extended", Released: "released"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", o)
}

// Reason says why a request was refused.
type Reason uint8

const (
	ReasonNone Reason = iota
	// ReasonOwned: a live entry names another node.
	ReasonOwned
	// ReasonQuiet: a force-grant found the entry written within the quiet
	// period; retry later.
	ReasonQuiet
	// ReasonNotOwner: a release found the entry naming someone else, or no
	// entry at all.
	ReasonNotOwner
)

var reasonNames = [...]string{ReasonNone: "", ReasonOwned: "owned", ReasonQuiet: "quiet-period", ReasonNotOwner: "not-owner"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", r)
}

// Decision is the leader's answer to a claim, release or force-grant.
type Decision struct {
	Outcome Outcome
	Reason  Reason
	Repo    string
	// Owner is the node the entry names after the decision: the requester
	// serves if it is itself, otherwise forwards there. Empty when no entry
	// exists.
	Owner string
	// Entry is the entry after the decision.
	Entry Entry
	// Write is true when Entry changed and must be persisted (key Key(Repo))
	// before the decision is acted upon.
	Write bool
	// Steered: placement granted the cold repo to Owner instead of the
	// requester, which should forward there.
	Steered bool
}

// Options are per-claim placement choices.
type Options struct {
	// Steer grants a cold repo to the rendezvous winner among the live
	// nodes rather than to the requester, for cache stickiness across
	// restarts (seed 003). The requester is then told to forward. A repo
	// whose expired entry names the requester is not steered: the
	// requester's cache is the warm one.
	Steer bool
}

// Map is the ownership map: repo → Entry. The leader holds the
// authoritative copy and is its only writer (Claim, Renew, Release,
// ForceGrant); followers hold a copy loaded with Put from the refdb, used
// only for routing. Methods mutate the receiver and return what must be
// persisted; a caller whose write fails must discard the map (or a Clone
// taken before) and reload, never keep serving from the unpersisted state.
// Entries leave only through Prune, which raises the map's epoch floor
// above every epoch it removes; grants start above the floor, which is
// what keeps Epoch monotonic per repo (see the package doc). A Map is not
// safe for concurrent use; one actor owns it.
type Map struct {
	t       Timings
	entries map[string]Entry
	floor   uint64
}

// NewMap returns an empty map using timings t.
func NewMap(t Timings) *Map { return &Map{t: t, entries: make(map[string]Entry)} }

// Timings returns the timings the map was created with.
func (m *Map) Timings() Timings { return m.t }

// Get returns repo's entry, live or not.
func (m *Map) Get(repo string) (Entry, bool) {
	e, ok := m.entries[repo]
	return e, ok
}

// Put stores an entry read from the refdb (loading at startup, a
// follower's poll). It is not a leader decision.
func (m *Map) Put(repo string, e Entry) error {
	if err := validRepo(repo); err != nil {
		return fmt.Errorf("put %s: %w", repo, err)
	}
	if err := validNode(e.Node); err != nil {
		return fmt.Errorf("put %s: %w", repo, err)
	}
	m.entries[repo] = e
	return nil
}

// Floor is the epoch floor: no epoch at or below it is granted again.
func (m *Map) Floor() uint64 { return m.floor }

// SetFloor loads the floor read from the refdb (key FloorKey). It only
// raises the floor, never lowers it.
func (m *Map) SetFloor(f uint64) { m.floor = max(m.floor, f) }

// Len is the number of entries.
func (m *Map) Len() int { return len(m.entries) }

// Repos lists the repos with an entry, sorted.
func (m *Map) Repos() []string {
	out := make([]string, 0, len(m.entries))
	for r := range m.entries {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Clone returns an independent copy.
func (m *Map) Clone() *Map {
	c := NewMap(m.t)
	c.floor = m.floor
	for r, e := range m.entries {
		c.entries[r] = e
	}
	return c
}

// Claim asks the lease of repo for node. Unowned or expired: granted
// (epoch bumped) to node, or with opts.Steer to the rendezvous winner among
// live. Live and owned by node: extended. Live and owned by another node:
// refused, Owner names it so the caller forwards. Errors only on invalid
// names.
func (m *Map) Claim(repo, node string, now time.Time, live LiveSet, opts Options) (Decision, error) {
	if err := validClaim(repo, node); err != nil {
		return Decision{}, fmt.Errorf("claim: %w", err)
	}
	cur, ok := m.entries[repo]
	switch {
	case ok && cur.Live(now) && cur.Node == node:
		return m.extend(repo, cur, now), nil
	case ok && cur.Live(now):
		return Decision{Outcome: Refused, Reason: ReasonOwned, Repo: repo, Owner: cur.Node, Entry: cur}, nil
	}
	to, steered := node, false
	if opts.Steer && !(ok && cur.Node == node) {
		if w := Rendezvous(repo, live); w != "" && w != node {
			to, steered = w, true
		}
	}
	d := m.grant(repo, to, now)
	d.Steered = steered
	return d, nil
}

// Renew extends every repo in repos whose entry still names node, expired
// or not (an entry naming node means no one else was granted it since),
// and declines the rest; the node must close declined repos at once.
// Renewed entries are to be persisted (Get gives them). A node never
// renews a repo it is draining, so renewals do not undo releases.
func (m *Map) Renew(node string, repos []string, now time.Time) (renewed, declined []string) {
	for _, repo := range repos {
		cur, ok := m.entries[repo]
		if !ok || cur.Node != node {
			declined = append(declined, repo)
			continue
		}
		m.extend(repo, cur, now)
		renewed = append(renewed, repo)
	}
	return renewed, declined
}

// Release shortens node's live lease on repo to now+Drain instead of
// deleting it: the entry keeps naming node, which serves through the drain
// and then closes, so nobody opens the database while it is still held.
// An expiry already sooner is kept. Refused if the entry names another
// node or is missing.
func (m *Map) Release(node, repo string, now time.Time) (Decision, error) {
	if err := validClaim(repo, node); err != nil {
		return Decision{}, fmt.Errorf("release: %w", err)
	}
	cur, ok := m.entries[repo]
	if !ok || cur.Node != node {
		return Decision{Outcome: Refused, Reason: ReasonNotOwner, Repo: repo, Owner: cur.Node, Entry: cur}, nil
	}
	d := Decision{Outcome: Released, Repo: repo, Owner: node, Entry: cur}
	if end := now.Add(m.t.Drain); end.Before(cur.Expires) {
		cur.Expires, cur.Written = end, now
		m.entries[repo] = cur
		d.Entry, d.Write = cur, true
	}
	return d, nil
}

// ForceGrant moves repo from deadNode, which requester could not reach
// twice, to requester. It is refused when the entry no longer names
// deadNode (Owner is the winner to forward to) and when the entry was
// written within the quiet period (ReasonQuiet, Owner still deadNode), so
// two nodes recovering from one dead owner cannot ping-pong the repo. An
// unowned or expired repo is simply granted, as a claim without steering.
func (m *Map) ForceGrant(repo, requester, deadNode string, now time.Time) (Decision, error) {
	if err := validClaim(repo, requester); err != nil {
		return Decision{}, fmt.Errorf("force-grant: %w", err)
	}
	if err := validNode(deadNode); err != nil {
		return Decision{}, fmt.Errorf("force-grant: dead node: %w", err)
	}
	cur, ok := m.entries[repo]
	switch {
	case !ok || !cur.Live(now):
		return m.grant(repo, requester, now), nil
	case cur.Node == requester:
		return m.extend(repo, cur, now), nil
	case cur.Node != deadNode:
		return Decision{Outcome: Refused, Reason: ReasonOwned, Repo: repo, Owner: cur.Node, Entry: cur}, nil
	case now.Sub(cur.Written) < m.t.QuietPeriod:
		return Decision{Outcome: Refused, Reason: ReasonQuiet, Repo: repo, Owner: cur.Node, Entry: cur}, nil
	}
	return m.grant(repo, requester, now), nil
}

// HandOver moves repos away from from, a draining leader that has closed
// them all: each entry still naming from is granted (epoch bumped) to the
// rendezvous winner among live, from excluded. The new owner then serves
// the repository at once, even while the leader restarts (a node serves
// under a live entry naming it when the leader cannot confirm), instead
// of needing a claim the absent leader cannot answer. An entry naming
// another node (claimed since the drain) is left alone, as is every repo
// when no other node is live. The returned decisions are grants, to be
// persisted (Write) before anyone acts on them.
func (m *Map) HandOver(from string, repos []string, live LiveSet, now time.Time) []Decision {
	others := make(LiveSet, 0, len(live))
	for _, nw := range live {
		if nw.Node != from {
			others = append(others, nw)
		}
	}
	var out []Decision
	for _, repo := range repos {
		cur, ok := m.entries[repo]
		if !ok || cur.Node != from {
			continue
		}
		if to := Rendezvous(repo, others); to != "" {
			out = append(out, m.grant(repo, to, now))
		}
	}
	return out
}

func (m *Map) grant(repo, node string, now time.Time) Decision {
	// An entry's epoch may be below the floor if it outlived a prune of
	// others; starting above both keeps it monotonic either way.
	e := Entry{Node: node, Expires: now.Add(m.t.TTL), Written: now, Epoch: max(m.entries[repo].Epoch, m.floor) + 1}
	m.entries[repo] = e
	return Decision{Outcome: Granted, Repo: repo, Owner: node, Entry: e, Write: true}
}

func (m *Map) extend(repo string, cur Entry, now time.Time) Decision {
	// Never shorten: a renewal racing a clock step backwards keeps the
	// later expiry.
	if exp := now.Add(m.t.TTL); exp.After(cur.Expires) {
		cur.Expires = exp
	}
	cur.Written = now
	m.entries[repo] = cur
	return Decision{Outcome: Extended, Repo: repo, Owner: cur.Node, Entry: cur, Write: true}
}

func validClaim(repo, node string) error {
	if err := validRepo(repo); err != nil {
		return err
	}
	return validNode(node)
}
