package cluster

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rgit/rgit/storage/names"
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
	Repo    names.Repo
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
//
// Entries granted to a node with an open session are bound to it (see
// Session and the package doc): the session's renewal renews them all.
//
// A map may read its entries from a Base (NewMapOver): the leader's is its
// database's current state, so a million entries are held once, in the
// database, not copied into the map. The map then keeps only the entries
// it decided (and removed) on top of the base; Settle drops those the base
// has caught up with.
type Map struct {
	t        Timings
	base     Base
	entries  map[names.Repo]Entry    // decided (or Put) on top of base, as stored: bound entries not Bind-ed
	removed  map[names.Repo]struct{} // pruned, possibly still in base
	sessions map[string]NodeSession
	floor    uint64
}

// Base is where a map reads the entries it has not decided itself: stored
// entries (bound ones not Bind-ed), by repository. Its contents may only
// move towards the map's own decisions (the leader's database, committing
// them).
type Base interface {
	Get(repo names.Repo) (Entry, bool)
	// Range yields every entry, in any order, until yield returns false.
	Range(yield func(repo names.Repo, e Entry) bool)
	// Fixed returns the base as it is now, unchanging from then on and
	// safe to read on any goroutine (Map.Snapshot). It is to cost far
	// less than a Range: the leader's pins its database's current view.
	Fixed() Base
}

// NewMap returns an empty map using timings t.
func NewMap(t Timings) *Map { return NewMapOver(t, nil) }

// NewMapOver returns a map reading base (nil: none) using timings t.
func NewMapOver(t Timings, base Base) *Map {
	return &Map{t: t, base: base, entries: make(map[names.Repo]Entry), removed: make(map[names.Repo]struct{}),
		sessions: make(map[string]NodeSession)}
}

// stored returns repo's entry as stored.
func (m *Map) stored(repo names.Repo) (Entry, bool) {
	if e, ok := m.entries[repo]; ok {
		return e, true
	}
	if _, gone := m.removed[repo]; gone || m.base == nil {
		return Entry{}, false
	}
	return m.base.Get(repo)
}

// each yields every stored entry.
func (m *Map) each(yield func(repo names.Repo, e Entry) bool) {
	for r, e := range m.entries {
		if !yield(r, e) {
			return
		}
	}
	if m.base == nil {
		return
	}
	m.base.Range(func(r names.Repo, e Entry) bool {
		if _, mine := m.entries[r]; mine {
			return true
		}
		if _, gone := m.removed[r]; gone {
			return true
		}
		return yield(r, e)
	})
}

// Settle forgets the decisions the base now holds (the leader's database
// committed them) and the removals it has applied, so the map's own
// memory is what is still in flight. Entries are compared as stored.
func (m *Map) Settle() {
	if m.base == nil {
		return
	}
	for r, e := range m.entries {
		if b, ok := m.base.Get(r); ok && sameEntry(b, e) {
			delete(m.entries, r)
		}
	}
	for r := range m.removed {
		if _, ok := m.base.Get(r); !ok {
			delete(m.removed, r)
		}
	}
}

func sameEntry(a, b Entry) bool {
	return a.Node == b.Node && a.Epoch == b.Epoch && a.Session == b.Session &&
		a.Written.Equal(b.Written) && a.Until.Equal(b.Until) && (a.Session != 0 || a.Expires.Equal(b.Expires))
}

// set records a decision.
func (m *Map) set(repo names.Repo, e Entry) {
	m.entries[repo] = e
	delete(m.removed, repo)
}

// Timings returns the timings the map was created with.
func (m *Map) Timings() Timings { return m.t }

// Get returns repo's entry, live or not, bound to its node's session.
// Marshalling it stores what the map holds.
func (m *Map) Get(repo names.Repo) (Entry, bool) {
	e, ok := m.stored(repo)
	if !ok {
		return Entry{}, false
	}
	return m.bind(e), true
}

func (m *Map) bind(e Entry) Entry {
	s, ok := m.sessions[e.Node]
	return Bind(e, s, ok)
}

// Put stores an entry read from the refdb (loading at startup, a
// follower's poll). It is not a leader decision.
func (m *Map) Put(repo names.Repo, e Entry) error {
	if err := validNode(e.Node); err != nil {
		return fmt.Errorf("put %s: %w", repo, err)
	}
	m.set(repo, e)
	return nil
}

// PutSession stores node's session record read from the refdb (key
// SessionKey(node)). It is not a leader decision.
func (m *Map) PutSession(node string, s NodeSession) error {
	if err := validNode(node); err != nil {
		return fmt.Errorf("put session: %w", err)
	}
	m.sessions[node] = s
	return nil
}

// Session returns node's current session record.
func (m *Map) Session(node string) (NodeSession, bool) {
	s, ok := m.sessions[node]
	return s, ok
}

// OpenSession starts a new session for node, a node (re)starting: its ID
// is one above the previous one, and the previous session ends now, so
// every entry bound to it lapses at once and the repositories the last
// incarnation held are free for anyone to claim, this node included (with
// a new epoch). The session is to be persisted (key SessionKey(node))
// before the node is told its ID.
func (m *Map) OpenSession(node string, now time.Time) (NodeSession, error) {
	if err := validNode(node); err != nil {
		return NodeSession{}, fmt.Errorf("open session: %w", err)
	}
	s := NodeSession{ID: m.sessions[node].ID + 1, Expires: now.Add(m.t.TTL), Renewed: now, Started: now}
	m.sessions[node] = s
	return s, nil
}

// RenewSession extends node's session id by the TTL, which renews every
// entry bound to it: one write per node, whatever it holds. It is
// declined (ok false, nothing to write) when id is not the node's current
// session, a renewal from an incarnation that has been replaced, and when
// the session has lapsed: its entries may have been granted to others
// since, and the node's acknowledgement extends its ServeLease on every
// repository it holds under the session, which it must then close
// instead (it opens a new session). A renewal that arrives late, after
// the lapse, is declined the same way, whenever it was sent.
func (m *Map) RenewSession(node string, id uint64, now time.Time) (s NodeSession, ok bool) {
	s, ok = m.sessions[node]
	if !ok || s.ID != id || id == 0 || !now.Before(s.Expires) {
		return s, false
	}
	if exp := now.Add(m.t.TTL); exp.After(s.Expires) {
		s.Expires = exp
	}
	s.Renewed = now
	m.sessions[node] = s
	return s, true
}

// Floor is the epoch floor: no epoch at or below it is granted again.
func (m *Map) Floor() uint64 { return m.floor }

// SetFloor loads the floor read from the refdb (key FloorKey). It only
// raises the floor, never lowers it.
func (m *Map) SetFloor(f uint64) { m.floor = max(m.floor, f) }

// Len is the number of entries (a scan of the base).
func (m *Map) Len() int {
	n := 0
	m.each(func(names.Repo, Entry) bool { n++; return true })
	return n
}

// Repos lists the repos with an entry, sorted.
func (m *Map) Repos() []names.Repo {
	var out []names.Repo
	m.each(func(r names.Repo, _ Entry) bool { out = append(out, r); return true })
	slices.SortFunc(out, names.Compare)
	return out
}

// Clone returns an independent copy (sharing the base).
func (m *Map) Clone() *Map {
	return &Map{t: m.t, base: m.base, entries: maps.Clone(m.entries), removed: maps.Clone(m.removed),
		sessions: maps.Clone(m.sessions), floor: m.floor}
}

// Snapshot returns a copy of m that reads its base as it is now
// (Base.Fixed): it no longer changes, whatever m decides next, and may be
// read on another goroutine while m's owner goes on deciding (the
// rebalancer's Scan). It copies m's own entries and sessions, not the
// base's.
func (m *Map) Snapshot() *Map {
	c := m.Clone()
	if c.base != nil {
		c.base = c.base.Fixed()
	}
	return c
}

// Claim asks the lease of repo for node. Unowned or expired: granted
// (epoch bumped) to node, or with opts.Steer to the rendezvous winner among
// live. Live and owned by node: extended. Live and owned by another node:
// refused, Owner names it so the caller forwards. Errors only on invalid
// names.
func (m *Map) Claim(repo names.Repo, node string, now time.Time, live LiveSet, opts Options) (Decision, error) {
	if err := validNode(node); err != nil {
		return Decision{}, fmt.Errorf("claim %s: %w", repo, err)
	}
	cur, ok := m.Get(repo)
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
	d := m.grant(repo, to, now, !steered)
	d.Steered = steered
	return d, nil
}

// Renew extends every repo in repos whose entry still names node, expired
// or not (an entry naming node means no one else was granted it since),
// and declines the rest; the node must close declined repos at once.
// Renewed entries are to be persisted (Get gives them). A node never
// renews a repo it is draining, so renewals do not undo releases. An
// entry bound to a session is renewed with the session (RenewSession);
// listing it here lifts its drain cap (a drain that ended under running
// sessions), and declines it if its session was replaced.
func (m *Map) Renew(node string, repos []names.Repo, now time.Time) (renewed, declined []names.Repo) {
	for _, repo := range repos {
		cur, ok := m.Get(repo)
		if !ok || cur.Node != node || (cur.Session != 0 && cur.Session != m.sessions[node].ID) {
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
func (m *Map) Release(node string, repo names.Repo, now time.Time) (Decision, error) {
	if err := validNode(node); err != nil {
		return Decision{}, fmt.Errorf("release %s: %w", repo, err)
	}
	cur, ok := m.Get(repo)
	if !ok || cur.Node != node {
		return Decision{Outcome: Refused, Reason: ReasonNotOwner, Repo: repo, Owner: cur.Node, Entry: cur}, nil
	}
	d := Decision{Outcome: Released, Repo: repo, Owner: node, Entry: cur}
	if end := now.Add(m.t.Drain); end.Before(cur.Expires) {
		cur.Expires, cur.Written = end, now
		if cur.Session != 0 {
			cur.Until = end
		}
		m.set(repo, cur)
		d.Entry, d.Write = cur, true
	}
	return d, nil
}

// ForceGrant moves repo from deadNode, which requester could not reach
// twice, to requester. It is refused when the entry no longer names
// deadNode (Owner is the winner to forward to) and before ForceAt
// (ReasonQuiet, Owner still deadNode): within the quiet period of the
// entry's last write, so two nodes recovering from one dead owner cannot
// ping-pong the repo, and while the entry is bound to a live session,
// which deadNode may still be serving under (ServeLease). An unowned or
// expired repo is simply granted, as a claim without steering.
func (m *Map) ForceGrant(repo names.Repo, requester, deadNode string, now time.Time) (Decision, error) {
	if err := validNode(requester); err != nil {
		return Decision{}, fmt.Errorf("force-grant %s: %w", repo, err)
	}
	if err := validNode(deadNode); err != nil {
		return Decision{}, fmt.Errorf("force-grant: dead node: %w", err)
	}
	cur, ok := m.Get(repo)
	switch {
	case !ok || !cur.Live(now):
		return m.grant(repo, requester, now, true), nil
	case cur.Node == requester:
		return m.extend(repo, cur, now), nil
	case cur.Node != deadNode:
		return Decision{Outcome: Refused, Reason: ReasonOwned, Repo: repo, Owner: cur.Node, Entry: cur}, nil
	case now.Before(ForceAt(cur, m.t.QuietPeriod)):
		return Decision{Outcome: Refused, Reason: ReasonQuiet, Repo: repo, Owner: cur.Node, Entry: cur}, nil
	}
	return m.grant(repo, requester, now, true), nil
}

// ForceAt is when a force-grant may take e, a live entry naming the
// unreachable owner, away from it: the quiet period after its last write
// and, for an entry bound to a session, the session's expiry (e as Get
// returns it: Expires is the session's). The owner may serve a bound
// entry until its ServeLease ends, which is before the session expires
// by the leader's clock (ServeLease: the clock-rate assumption), so no
// previous owner serves a read, or refuses a push as stale, once another
// node may have been granted the repository. A dead owner's repository
// therefore moves at most a TTL after its last renewal. A per-repository
// lease (Session 0) is never served (a node serves only entries bound to
// its session) and moves after the quiet period alone.
//
//	Session   ForceAt
//	0         Written + quiet
//	≠ 0       max(Written + quiet, Expires)
func ForceAt(e Entry, quiet time.Duration) time.Time {
	at := e.Written.Add(quiet)
	if e.Session != 0 && e.Expires.After(at) {
		at = e.Expires
	}
	return at
}

// HandOver moves repos away from from, a draining leader that has closed
// them all: each entry still naming from is granted (epoch bumped) to the
// rendezvous winner among live, from excluded, bound to its session. The
// new owner then serves the repository at once, even while the leader
// restarts (a node serves under a live entry naming it when the leader
// cannot confirm, as long as its ServeLease covers the entry's session,
// which is why the entry is bound: a per-repository lease is never
// served), instead of needing a claim the absent leader cannot answer.
// The session keeps the entry alive while its node lives even if it never
// opens the repository: a hand-over holds only what the leader had open. An entry naming
// another node (claimed since the drain) is left alone, as is every repo
// when no other node is live. The returned decisions are grants, to be
// persisted (Write) before anyone acts on them.
func (m *Map) HandOver(from string, repos []names.Repo, live LiveSet, now time.Time) []Decision {
	others := make(LiveSet, 0, len(live))
	for _, nw := range live {
		if nw.Node != from {
			others = append(others, nw)
		}
	}
	var out []Decision
	for _, repo := range repos {
		cur, ok := m.Get(repo)
		if !ok || cur.Node != from {
			continue
		}
		if to := Rendezvous(repo, others); to != "" {
			out = append(out, m.grant(repo, to, now, true))
		}
	}
	return out
}

// grant gives repo to node with a new epoch. With bind, node asked for it
// and the entry is bound to node's current session if it has one
// (whatever the session's state: a lapsed one is the node's to renew).
// Otherwise, and for a grant node did not ask for (steered), it is a
// per-repository lease: the TTL bounds it unless node opens the
// repository and renews it, which binds it (extend). A session would
// otherwise keep alive, for as long as node lives, an entry node never
// serves.
func (m *Map) grant(repo names.Repo, node string, now time.Time, bind bool) Decision {
	// An entry's epoch may be below the floor if it outlived a prune of
	// others; starting above both keeps it monotonic either way.
	e := Entry{Node: node, Expires: now.Add(m.t.TTL), Written: now, Epoch: m.nextEpoch(repo)}
	if s, ok := m.sessions[node]; ok && bind {
		e.Expires, e.Session = time.Time{}, s.ID
		e = m.bind(e)
	}
	m.set(repo, e)
	return Decision{Outcome: Granted, Repo: repo, Owner: node, Entry: e, Write: true}
}

// extend renews cur, node's live entry: if node has a session, by binding
// the entry to it without a drain cap (the session renews it); else, a
// per-repository lease, by the TTL. Its epoch stays: the node holds it.
// nextEpoch is repo's next grant's epoch.
func (m *Map) nextEpoch(repo names.Repo) uint64 {
	cur, _ := m.stored(repo)
	return max(cur.Epoch, m.floor) + 1
}

func (m *Map) extend(repo names.Repo, cur Entry, now time.Time) Decision {
	if s, ok := m.sessions[cur.Node]; ok {
		// A per-repository lease of a node that has a session now (an
		// upgrade) is bound to it from here on.
		cur.Session, cur.Until, cur.Written = s.ID, time.Time{}, now
		cur = m.bind(cur)
		m.set(repo, cur)
		return Decision{Outcome: Extended, Repo: repo, Owner: cur.Node, Entry: cur, Write: true}
	}
	// Never shorten: a renewal racing a clock step backwards keeps the
	// later expiry.
	if exp := now.Add(m.t.TTL); exp.After(cur.Expires) {
		cur.Expires = exp
	}
	cur.Written = now
	m.set(repo, cur)
	return Decision{Outcome: Extended, Repo: repo, Owner: cur.Node, Entry: cur, Write: true}
}
