package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rgit/rgit/storage/names"
)

// Rebalancing: steering places a repository only when it is claimed cold,
// so a node that joins would otherwise get nothing that stays warm. The
// leader therefore moves warm repositories toward their rendezvous winner
// among the live nodes, a few at a time, with the drain that a release
// already is: it tells the target, in the answer to its heartbeat
// (LeasesRenewed.Prewarm), to fetch the repository's packs into its
// cache, then the holder, in the answer to its own next heartbeat
// (LeasesRenewed.Release), to release the repository; the holder drains it
// (serving meanwhile, closing at the end, finishing the sessions still
// running) and the leader hands the lapsed entry to the target, bound to
// the target's session (Map.MoveTo). No step serves from two nodes: the
// target is granted the repository only once the holder's entry lapsed,
// exactly as a claim would be, and the fence of the repository's database
// stops any commit the holder still attempts after that.

// Rebalancing limits: how long a move may wait for its holder to let go,
// and how long a repository stays put after a move ended.
const (
	// MoveTimeout ends a move whose holder has not let go (a release lost
	// with its heartbeat answer, sessions lingering after the drain, a
	// holder that could not claim the repository it never opened to let
	// it go: OnHolderRelease). It has done no harm: the entry still names
	// the holder.
	MoveTimeout = 30 * time.Second
	// MoveCooldown keeps a repository where a move (finished or not) left
	// it, so that no repository ping-pongs between nodes while the live
	// set changes.
	MoveCooldown = 2 * time.Minute
	// RebalanceEvery is the period of the leader's rebalancing round.
	RebalanceEvery = time.Second
	// RescanEvery: rounds read the whole map again only once the live
	// nodes change, or after this long (a claim may have placed a
	// repository away from its winner meanwhile), so that the leader does
	// not read a large map every second (Rebalancer.Round).
	RescanEvery = time.Minute
)

// RebalanceLimits bound the rebalancer's pace.
type RebalanceLimits struct {
	// InFlight is how many moves may be under way at once (the pace:
	// each waits for the target's heartbeat, the holder's and a drain).
	InFlight int
	Timeout  time.Duration
	Cooldown time.Duration
}

// DefaultRebalanceLimits returns the production limits with inFlight
// moves at once.
func DefaultRebalanceLimits(inFlight int) RebalanceLimits {
	return RebalanceLimits{InFlight: inFlight, Timeout: MoveTimeout, Cooldown: MoveCooldown}
}

// Held is one repository's live entry as the rebalancer reads it.
type Held struct {
	Repo  names.Repo
	Node  string
	Epoch uint64
}

// held returns repo's entry e as the rebalancer reads it, if it is live
// at now and bound to a session (a per-repository lease is a steered
// grant its node never claimed, which lapses within the TTL unless it
// does).
func (m *Map) held(repo names.Repo, e Entry, now time.Time) (Held, bool) {
	if e.Session == 0 {
		return Held{}, false
	}
	if e = m.bind(e); !e.Live(now) {
		return Held{}, false
	}
	return Held{Repo: repo, Node: e.Node, Epoch: e.Epoch}, true
}

// Members lists the nodes whose session is live at now, sorted: those
// that may still hold or place repositories, including any that left
// placement for a moment or are draining.
func (m *Map) Members(now time.Time) []string {
	var out []string
	for n, s := range m.sessions {
		if now.Before(s.Expires) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Move is a repository being moved from its holder to its placement.
type Move struct {
	Repo     names.Repo
	From, To string
	// Epoch is From's grant when the move started: a later grant, to
	// anyone, ends the move.
	Epoch   uint64
	Started time.Time
	// Warmed: the target was told to prewarm (Rebalancer.Prewarms); only
	// then is the holder told to release.
	Warmed bool
}

func (m Move) String() string {
	return fmt.Sprintf("%s %s→%s (epoch %d)", m.Repo, m.From, m.To, m.Epoch)
}

// NextMove decides whether to start moving h's repository at now: held
// by a live node that is not its rendezvous winner among live. A
// repository already moving, or whose last move ended within the cooldown
// (ended), stays. So does one whose winner would differ among all, live
// and known (the nodes whose session is live, live's superset; see
// Rebalancer.Round): a node that left placement for a moment (it
// released a lease and was not heard since) or is draining must not send
// its repositories' neighbours to their second choice, only for them to
// come back. The holder and the target are therefore both live; a
// draining or lapsed node is neither.
//
//	holder live   winner(live)   winner(known)   cooldown/moving   → move
//	no            any            any             any               → no (drain, lapse: claims place it)
//	yes           = holder       any             any               → no
//	yes           ≠ holder       ≠ winner(live)  any               → no (live set unsettled)
//	yes           ≠ holder       = winner(live)  yes               → no
//	yes           ≠ holder       = winner(live)  no                → to winner(live)
//
// The checks run cheapest and most often decisive first: a scan asks it
// of every entry, most of them at their winner.
func NextMove(h Held, live, all LiveSet, moving map[names.Repo]Move, ended map[names.Repo]time.Time, now time.Time, lim RebalanceLimits) (Move, bool) {
	if !live.Has(h.Node) {
		return Move{}, false
	}
	to := Rendezvous(h.Repo, live)
	if to == "" || to == h.Node {
		return Move{}, false
	}
	if _, busy := moving[h.Repo]; busy {
		return Move{}, false
	}
	if at, ok := ended[h.Repo]; ok && now.Before(at.Add(lim.Cooldown)) {
		return Move{}, false
	}
	if Rendezvous(h.Repo, all) != to {
		return Move{}, false
	}
	return Move{Repo: h.Repo, From: h.Node, To: to, Epoch: h.Epoch, Started: now}, true
}

// MoveVerdict is what becomes of a move under way.
type MoveVerdict uint8

const (
	// MoveWait: the holder still holds the repository; it is (again)
	// told to release it.
	MoveWait MoveVerdict = iota
	// MoveHandOver: the holder's entry lapsed; grant it to the target
	// (Map.MoveTo).
	MoveHandOver
	// MoveDone: the repository was granted to the target since (a claim
	// placed it there).
	MoveDone
	// MoveAbandoned: granted to another node since, the target left, or
	// the holder did not let go within the timeout.
	MoveAbandoned
)

var moveVerdictNames = [...]string{MoveWait: "wait", MoveHandOver: "hand-over", MoveDone: "done", MoveAbandoned: "abandoned"}

func (v MoveVerdict) String() string {
	if int(v) < len(moveVerdictNames) {
		return moveVerdictNames[v]
	}
	return fmt.Sprintf("move(%d)", v)
}

// StepMove decides for mv at now from repo's entry e (ok false: none, as
// Map.Get returns it) and the live set.
//
//	entry                          target live   started+timeout   → verdict
//	none                           any           any               → abandoned (pruned: deleted)
//	other epoch, To                any           any               → done
//	other epoch, not To            any           any               → abandoned
//	From's epoch                   no            any               → abandoned
//	From's epoch, lapsed           yes           any               → hand-over
//	From's epoch, live             yes           not reached       → wait
//	From's epoch, live             yes           reached           → abandoned
func StepMove(mv Move, e Entry, ok bool, live LiveSet, now time.Time, lim RebalanceLimits) MoveVerdict {
	switch {
	case !ok:
		return MoveAbandoned
	case e.Epoch != mv.Epoch || e.Node != mv.From:
		if e.Node == mv.To {
			return MoveDone
		}
		return MoveAbandoned
	case !live.Has(mv.To):
		return MoveAbandoned
	case !e.Live(now):
		return MoveHandOver
	case !now.Before(mv.Started.Add(lim.Timeout)):
		return MoveAbandoned
	}
	return MoveWait
}

// HolderRelease is what a holder does with a repository the leader
// moves elsewhere (LeasesRenewed.Release).
type HolderRelease uint8

const (
	// ReleaseIgnore: not held here (the map names another node, another
	// session of this one, or nothing live), or already let go (the
	// actor drains, or lingers under running sessions); a move the
	// leader still waits on times out, harmlessly.
	ReleaseIgnore HolderRelease = iota
	// ReleaseDrain: the node serves it; release it through the drain.
	ReleaseDrain
	// ReleaseClaim: the map names the node for it under its session, but
	// the node never opened it (a hand-over, a move here, unrequested
	// since). Ignoring the release would keep it where it is for good:
	// the move would time out, and so would every later one. The node
	// claims it, as a request would (the leader extends the entry), and
	// releases it through the drain once granted.
	ReleaseClaim
)

// OnHolderRelease decides for a release of a repository: actor, whether
// a repo actor of the node holds it (serving, draining or lingering),
// renews, whether that actor serves it (its lease is in the heartbeat),
// e the node's view of the entry (ok false: none), bound to its node's
// session, self the node and session its current session.
//
//	actor   renews   entry at now                            → action
//	yes     yes      any                                     → drain
//	yes     no       any                                     → ignore (letting go already)
//	no      -        names self, live, under session         → claim, then drain
//	no      -        otherwise                               → ignore
func OnHolderRelease(actor, renews bool, e Entry, ok bool, self string, session uint64, now time.Time) HolderRelease {
	switch {
	case actor && renews:
		return ReleaseDrain
	case actor:
		return ReleaseIgnore
	case ok && session != 0 && e.Node == self && e.Session == session && e.Live(now):
		return ReleaseClaim
	}
	return ReleaseIgnore
}

// MoveTo grants repo to node to, the target of a move, if its entry still
// names from under epoch and has lapsed at now (released and drained, or
// its session lapsed): the same grant a claim would then make, bound to
// to's session (see HandOver: the target serves it even while the leader
// restarts). ok is false, and nothing changes, otherwise.
func (m *Map) MoveTo(repo names.Repo, from string, epoch uint64, to string, now time.Time) (Decision, bool) {
	cur, ok := m.Get(repo)
	if !ok || cur.Node != from || cur.Epoch != epoch || cur.Live(now) {
		return Decision{}, false
	}
	return m.grant(repo, to, now, true), true
}

// Rebalancer is the leader's record of the moves under way, of when
// recent ones ended (the cooldown) and of the repositories its last scan
// of the map found misplaced. It lives in memory only: a new leader
// starts with none, and a holder told to release by the old one has
// drained into a lapsed entry, which claims place. Not safe for
// concurrent use; the leader actor owns it. The scans it gives out (Scan)
// are the part that runs elsewhere.
type Rebalancer struct {
	lim    RebalanceLimits
	moving map[names.Repo]Move
	ended  map[names.Repo]time.Time
	// scan is the last look at the map: when, with which nodes, and the
	// repositories it found to move (NextMove), in repository order, that
	// rounds have not taken yet; and the scan given out and not yet
	// taken back (Scanned), if any.
	scan struct {
		at          time.Time
		live, known LiveSet
		queue       []Held
		running     *Scan
	}
}

// NewRebalancer returns a rebalancer with no moves, pacing them by lim.
func NewRebalancer(lim RebalanceLimits) *Rebalancer {
	return &Rebalancer{lim: lim, moving: make(map[names.Repo]Move), ended: make(map[names.Repo]time.Time)}
}

// MoveEnd is a move that ended in a round, and how.
type MoveEnd struct {
	Move
	Verdict MoveVerdict // MoveHandOver (the grant is in Round.Handed), MoveDone or MoveAbandoned
}

// Round is what one rebalancing round decided.
type Round struct {
	// Handed are the grants of hand-overs, to be persisted (Write) before
	// anyone acts on them.
	Handed  []Decision
	Ended   []MoveEnd
	Started []Move
	// Scan, if not nil, is a scan of the whole map the round found due:
	// the caller runs it (Scan.Run, off the map's owner) and gives its
	// result to Scanned.
	Scan *Scan
}

// Round steps every move under way at now (StepMove; hand-overs are
// granted on m), forgets cooldowns that are over, and, while there is
// room, starts the moves its last scan of m found, each decided again
// (NextMove) on the repository's entry as it is now: it may have moved,
// lapsed or been claimed since.
//
// A round does not read the whole map itself: a million entries cost
// seconds, during which the map's owner would decide nothing. When it
// has room and the last scan is stale (the live or known nodes changed
// since, which changes the winners, or RescanEvery passed, for entries
// placed away from their winner after it: a claim sticky to the
// requester's warm cache) it gives out a Scan of a snapshot of m instead,
// unless one is running already. Until its result is in (Scanned), rounds
// go on taking moves from the last queue. Known holds the nodes whose
// session is live (Map.Members, weighted); live, the ones placement uses.
//
//	room   scan due   scan running   → round
//	no     any        any            → steps moves only
//	yes    no         any            → starts moves from the queue
//	yes    yes        no             → gives out a Scan; starts moves from the queue
//	yes    yes        yes            → starts moves from the queue
func (r *Rebalancer) Round(m *Map, live, known LiveSet, now time.Time) Round {
	var out Round
	for _, repo := range sortedMoves(r.moving) {
		if d, end, ok := r.step(m, repo, live, now); ok {
			if end.Verdict == MoveHandOver {
				out.Handed = append(out.Handed, d)
			}
			out.Ended = append(out.Ended, end)
		}
	}
	for repo, at := range r.ended {
		if !now.Before(at.Add(r.lim.Cooldown)) {
			delete(r.ended, repo)
		}
	}
	if len(r.moving) >= r.lim.InFlight {
		return out
	}
	all := append(slices.Clip(live), known...)
	if r.scan.running == nil && r.scanDue(live, known, now) {
		r.scan.running = &Scan{m: m.Snapshot(), live: slices.Clone(live), known: slices.Clone(known), all: slices.Clone(all),
			moving: maps.Clone(r.moving), ended: maps.Clone(r.ended), lim: r.lim, at: now}
		out.Scan = r.scan.running
	}
	for len(r.scan.queue) > 0 && len(r.moving) < r.lim.InFlight {
		repo := r.scan.queue[0].Repo
		r.scan.queue = r.scan.queue[1:]
		e, ok := m.stored(repo)
		if !ok {
			continue
		}
		h, ok := m.held(repo, e, now)
		if !ok {
			continue
		}
		if mv, ok := NextMove(h, live, all, r.moving, r.ended, now, r.lim); ok {
			r.moving[mv.Repo] = mv
			out.Started = append(out.Started, mv)
		}
	}
	return out
}

// Scan is one read of the whole map for the repositories to move
// (Rebalancer.Round gives it out). It holds a snapshot of the map
// (Map.Snapshot) and copies of the rebalancer's state as of its round,
// and nothing its owner changes, so Run may go on any goroutine while the
// owner keeps deciding.
type Scan struct {
	m                *Map
	live, known, all LiveSet
	moving           map[names.Repo]Move
	ended            map[names.Repo]time.Time
	lim              RebalanceLimits
	at               time.Time
}

// ScanResult is what a Scan found, for Rebalancer.Scanned.
type ScanResult struct {
	scan *Scan
	// queue: the repositories held away from their placement (NextMove
	// as of the scan's round), sorted, so that moves start in repository
	// order and the in-process cluster's traces are the same run to run.
	queue []Held
}

// Found is how many repositories the scan found to move.
func (r ScanResult) Found() int { return len(r.queue) }

// scanCheckEvery is how many entries a scan reads between looks at its
// context.
const scanCheckEvery = 4096

// Run reads every entry of the snapshot (no sort but of the misplaced
// ones: a million entries cost a scan, not a sort of names). It is pure
// CPU; once ctx is done it stops within scanCheckEvery entries and
// returns ctx's error.
func (s *Scan) Run(ctx context.Context) (ScanResult, error) {
	var queue []Held
	n := 0
	s.m.each(func(repo names.Repo, e Entry) bool {
		if n++; n%scanCheckEvery == 0 && ctx.Err() != nil {
			return false
		}
		if h, ok := s.m.held(repo, e, s.at); ok {
			if _, ok := NextMove(h, s.live, s.all, s.moving, s.ended, s.at, s.lim); ok {
				queue = append(queue, h)
			}
		}
		return true
	})
	if err := ctx.Err(); err != nil {
		return ScanResult{}, fmt.Errorf("rebalance scan: %w", err)
	}
	slices.SortFunc(queue, func(a, b Held) int { return names.Compare(a.Repo, b.Repo) })
	return ScanResult{scan: s, queue: queue}, nil
}

// Scanned takes back the result of the scan r gave out last, which
// replaces the queue, as of the scan's round: its time and nodes are what
// the next scan is due after (Round); the next round starts the moves.
// It reports whether it did: any other result (a scan of another
// rebalancer, an earlier incarnation of the map's owner, or one taken
// back already) changes nothing.
//
// A result whose nodes are no longer the live or known ones is installed
// all the same: the next round finds a scan due and gives out a new one,
// and meanwhile each move it takes from the queue is decided again on
// the entry and nodes as they are then (NextMove), as every one is.
func (r *Rebalancer) Scanned(res ScanResult) bool {
	s := res.scan
	if s == nil || s != r.scan.running {
		return false
	}
	r.scan.running = nil
	r.scan.queue, r.scan.at, r.scan.live, r.scan.known = res.queue, s.at, s.live, s.known
	return true
}

// scanDue reports whether a round at now reads the map again: the first
// time, once the live or known nodes changed, and RescanEvery after the
// last read.
func (r *Rebalancer) scanDue(live, known LiveSet, now time.Time) bool {
	q := r.scan
	return q.at.IsZero() || !now.Before(q.at.Add(RescanEvery)) || !slices.Equal(live, q.live) || !slices.Equal(known, q.known)
}

// Due hands repo over at once if its move is due (the holder's entry
// lapsed): a claim for it, which the leader decides next, then finds the
// target's entry instead of granting the lapsed one back to the holder,
// whose cache is the warm one by Claim's rule. ok reports an ended move.
func (r *Rebalancer) Due(m *Map, repo names.Repo, live LiveSet, now time.Time) (Decision, MoveEnd, bool) {
	if _, moving := r.moving[repo]; !moving {
		return Decision{}, MoveEnd{}, false
	}
	return r.step(m, repo, live, now)
}

// step applies StepMove to repo's move; ok reports that it ended.
func (r *Rebalancer) step(m *Map, repo names.Repo, live LiveSet, now time.Time) (Decision, MoveEnd, bool) {
	mv := r.moving[repo]
	e, found := m.Get(repo)
	v := StepMove(mv, e, found, live, now, r.lim)
	var d Decision
	switch v {
	case MoveWait:
		return Decision{}, MoveEnd{}, false
	case MoveHandOver:
		var handed bool
		if d, handed = m.MoveTo(repo, mv.From, mv.Epoch, mv.To, now); !handed {
			v = MoveAbandoned // StepMove said lapsed; MoveTo agrees by construction
		}
	}
	delete(r.moving, repo)
	r.ended[repo] = now
	return d, MoveEnd{Move: mv, Verdict: v}, true
}

// Prewarms lists the repositories moving to node whose target has not
// been told to prewarm them yet, sorted, and records that it now is: the
// leader tells node in the answer to its heartbeat. A lost answer costs
// the target a cold first request, no more.
func (r *Rebalancer) Prewarms(node string) []names.Repo {
	var out []names.Repo
	for _, repo := range sortedMoves(r.moving) {
		if mv := r.moving[repo]; mv.To == node && !mv.Warmed {
			mv.Warmed = true
			r.moving[repo] = mv
			out = append(out, repo)
		}
	}
	return out
}

// Releases lists the repositories node is to release now, sorted: the
// moves from it under way whose target was told to prewarm. Repeating
// one is harmless: a holder already draining it, or no longer holding
// it, ignores it.
func (r *Rebalancer) Releases(node string) []names.Repo {
	var out []names.Repo
	for _, repo := range sortedMoves(r.moving) {
		if mv := r.moving[repo]; mv.From == node && mv.Warmed {
			out = append(out, repo)
		}
	}
	return out
}

// Moving reports whether repo is being moved away from node: its release
// is the rebalancer's doing, not a node leaving placement.
func (r *Rebalancer) Moving(repo names.Repo, node string) bool {
	mv, ok := r.moving[repo]
	return ok && mv.From == node
}

func sortedMoves(moving map[names.Repo]Move) []names.Repo {
	out := make([]names.Repo, 0, len(moving))
	for r := range moving {
		out = append(out, r)
	}
	slices.SortFunc(out, names.Compare)
	return out
}
