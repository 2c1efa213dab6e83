package cluster

import (
	"maps"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/names"
)

var t0 = time.Unix(1_700_000_000, 0).UTC()

func at(d time.Duration) time.Time { return t0.Add(d) }

// rn is the repository s, which must be a valid name.
func rn(s string) names.Repo { return names.MustParse(s) }

func mapWith(entries map[names.Repo]Entry) *Map {
	m := NewMap(DefaultTimings())
	for r, e := range entries {
		if err := m.Put(r, e); err != nil {
			panic(err)
		}
	}
	return m
}

func TestClaim(t *testing.T) {
	live := LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 1}}
	owned := func(n string, exp, wr time.Duration, ep uint64) map[names.Repo]Entry {
		return map[names.Repo]Entry{rn("a/b"): {Node: n, Expires: at(exp), Written: at(wr), Epoch: ep}}
	}
	cases := []struct {
		name    string
		entries map[names.Repo]Entry
		node    string
		now     time.Duration
		steer   bool
		want    Outcome
		owner   string
		epoch   uint64
		expires time.Duration
	}{
		{"unowned granted", nil, "rgit-1", 0, false, Granted, "rgit-1", 1, 10 * time.Second},
		{"expired granted, epoch bumped", owned("rgit-2", 5*time.Second, 0, 4), "rgit-1", 5 * time.Second, false, Granted, "rgit-1", 5, 15 * time.Second},
		{"live other refused", owned("rgit-2", 10*time.Second, 0, 4), "rgit-1", 9 * time.Second, false, Refused, "rgit-2", 4, 10 * time.Second},
		{"own live extended, epoch kept", owned("rgit-1", 10*time.Second, 0, 4), "rgit-1", 2 * time.Second, false, Extended, "rgit-1", 4, 12 * time.Second},
		{"own expired regranted, not steered", owned("rgit-1", time.Second, 0, 4), "rgit-1", 2 * time.Second, true, Granted, "rgit-1", 5, 12 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := mapWith(c.entries)
			d, err := m.Claim(rn("a/b"), c.node, at(c.now), live, Options{Steer: c.steer})
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != c.want || d.Owner != c.owner || d.Entry.Epoch != c.epoch || !d.Entry.Expires.Equal(at(c.expires)) {
				t.Fatalf("got %v owner=%s epoch=%d expires=%v", d.Outcome, d.Owner, d.Entry.Epoch, d.Entry.Expires.Sub(t0))
			}
			if d.Write != (d.Outcome != Refused) {
				t.Fatalf("write=%v for %v", d.Write, d.Outcome)
			}
			if got, _ := m.Get(rn("a/b")); got != d.Entry {
				t.Fatalf("map holds %+v, decision says %+v", got, d.Entry)
			}
		})
	}
}

func TestClaimSteer(t *testing.T) {
	live := LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 1}}
	var steered, self int
	for i := 0; i < 300; i++ {
		repo := rn("o/r" + string(rune('a'+i%26)) + time.Duration(i).String())
		m := NewMap(DefaultTimings())
		d, err := m.Claim(repo, "rgit-1", t0, live, Options{Steer: true})
		if err != nil {
			t.Fatal(err)
		}
		want := Rendezvous(repo, live)
		if d.Outcome != Granted || d.Owner != want || d.Steered != (want != "rgit-1") {
			t.Fatalf("%s: got %+v, rendezvous says %s", repo, d, want)
		}
		if d.Steered {
			steered++
		} else {
			self++
		}
	}
	if steered == 0 || self == 0 {
		t.Fatalf("steered=%d self=%d: expected both", steered, self)
	}
	// No live nodes: steering has nowhere to go, the requester gets it.
	m := NewMap(DefaultTimings())
	d, _ := m.Claim(rn("x/y"), "rgit-1", t0, nil, Options{Steer: true})
	if d.Owner != "rgit-1" || d.Steered {
		t.Fatalf("empty live set: %+v", d)
	}
}

func TestClaimInvalid(t *testing.T) {
	m := NewMap(DefaultTimings())
	for _, node := range []string{"", "rgit 1"} {
		if _, err := m.Claim(rn("a/b"), node, t0, nil, Options{}); err == nil {
			t.Errorf("claim by %q accepted", node)
		}
	}
	if m.Len() != 0 {
		t.Fatal("invalid claim wrote an entry")
	}
}

func TestRenew(t *testing.T) {
	m := mapWith(map[names.Repo]Entry{
		rn("a/live"):    {Node: "rgit-1", Expires: at(10 * time.Second), Written: t0, Epoch: 1},
		rn("a/expired"): {Node: "rgit-1", Expires: at(time.Second), Written: t0, Epoch: 2},
		rn("a/moved"):   {Node: "rgit-2", Expires: at(10 * time.Second), Written: t0, Epoch: 3},
	})
	renewed, declined := m.Renew("rgit-1", []names.Repo{rn("a/live"), rn("a/expired"), rn("a/moved"), rn("a/none")}, at(3*time.Second))
	if got, want := len(renewed), 2; got != want || renewed[0] != rn("a/live") || renewed[1] != rn("a/expired") {
		t.Fatalf("renewed %v", renewed)
	}
	if len(declined) != 2 || declined[0] != rn("a/moved") || declined[1] != rn("a/none") {
		t.Fatalf("declined %v", declined)
	}
	for _, r := range renewed {
		e, _ := m.Get(r)
		if !e.Expires.Equal(at(13*time.Second)) || !e.Written.Equal(at(3*time.Second)) {
			t.Errorf("%s: %+v", r, e)
		}
	}
	if e, _ := m.Get(rn("a/live")); e.Epoch != 1 {
		t.Errorf("renewal changed epoch: %d", e.Epoch)
	}
	if e, _ := m.Get(rn("a/moved")); e.Node != "rgit-2" || !e.Written.Equal(t0) {
		t.Errorf("declined entry changed: %+v", e)
	}
}

func TestRelease(t *testing.T) {
	cases := []struct {
		name    string
		entry   *Entry
		node    string
		now     time.Duration
		want    Outcome
		write   bool
		expires time.Duration
	}{
		{"live shortened to drain", &Entry{Node: "rgit-1", Expires: at(10 * time.Second), Written: t0, Epoch: 1}, "rgit-1", 2 * time.Second, Released, true, 2500 * time.Millisecond},
		{"already sooner kept", &Entry{Node: "rgit-1", Expires: at(2200 * time.Millisecond), Written: t0, Epoch: 1}, "rgit-1", 2 * time.Second, Released, false, 2200 * time.Millisecond},
		{"other owner refused", &Entry{Node: "rgit-2", Expires: at(10 * time.Second), Written: t0, Epoch: 1}, "rgit-1", 2 * time.Second, Refused, false, 10 * time.Second},
		{"missing refused", nil, "rgit-1", 0, Refused, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMap(DefaultTimings())
			if c.entry != nil {
				_ = m.Put(rn("a/b"), *c.entry)
			}
			d, err := m.Release(c.node, rn("a/b"), at(c.now))
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != c.want || d.Write != c.write {
				t.Fatalf("got %v write=%v", d.Outcome, d.Write)
			}
			if e, ok := m.Get(rn("a/b")); ok != (c.entry != nil) || ok && !e.Expires.Equal(at(c.expires)) {
				t.Fatalf("entry %+v ok=%v", e, ok)
			}
			if c.want == Released {
				e, _ := m.Get(rn("a/b"))
				if e.Node != c.node || !e.Live(at(c.now)) {
					t.Fatalf("released entry must keep naming the node through the drain: %+v", e)
				}
			}
		})
	}
}

func TestForceGrant(t *testing.T) {
	dead := Entry{Node: "rgit-2", Expires: at(10 * time.Second), Written: t0, Epoch: 7}
	cases := []struct {
		name  string
		entry *Entry
		now   time.Duration
		want  Outcome
		why   Reason
		owner string
		epoch uint64
	}{
		{"names dead, quiet period over", &dead, time.Second, Granted, ReasonNone, "rgit-1", 8},
		{"written in last second refused", &dead, 999 * time.Millisecond, Refused, ReasonQuiet, "rgit-2", 7},
		{"names someone else: loser told winner", &Entry{Node: "rgit-3", Expires: at(10 * time.Second), Written: t0, Epoch: 8}, 5 * time.Second, Refused, ReasonOwned, "rgit-3", 8},
		{"already requester", &Entry{Node: "rgit-1", Expires: at(10 * time.Second), Written: t0, Epoch: 8}, 5 * time.Second, Extended, ReasonNone, "rgit-1", 8},
		{"expired: plain grant even in quiet period", &Entry{Node: "rgit-2", Expires: at(500 * time.Millisecond), Written: t0, Epoch: 7}, 600 * time.Millisecond, Granted, ReasonNone, "rgit-1", 8},
		{"unowned", nil, 0, Granted, ReasonNone, "rgit-1", 1},
		{"bound to a live session: refused until it lapses", &Entry{Node: "rgit-2", Session: 3, Written: t0, Epoch: 7}, 9 * time.Second, Refused, ReasonQuiet, "rgit-2", 7},
		{"bound, session lapsed: granted", &Entry{Node: "rgit-2", Session: 3, Written: t0, Epoch: 7}, 10 * time.Second, Granted, ReasonNone, "rgit-1", 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMap(DefaultTimings())
			// rgit-2's session 3, renewed last at t0, lapses a TTL later.
			_ = m.PutSession("rgit-2", NodeSession{ID: 3, Expires: at(TTL), Renewed: t0, Started: t0})
			if c.entry != nil {
				_ = m.Put(rn("a/b"), *c.entry)
			}
			d, err := m.ForceGrant(rn("a/b"), "rgit-1", "rgit-2", at(c.now))
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != c.want || d.Reason != c.why || d.Owner != c.owner || d.Entry.Epoch != c.epoch {
				t.Fatalf("got %v/%v owner=%s epoch=%d", d.Outcome, d.Reason, d.Owner, d.Entry.Epoch)
			}
		})
	}
	if _, err := NewMap(DefaultTimings()).ForceGrant(rn("a/b"), "rgit-1", "", t0); err == nil {
		t.Fatal("empty dead node accepted")
	}
}

// TestEpochMonotonic drives random claims, renewals, releases and
// force-grants and checks that a repo's epoch never decreases and that
// one epoch never names two nodes.
func TestEpochMonotonic(t *testing.T) {
	m := NewMap(DefaultTimings())
	nodes := []string{"rgit-0", "rgit-1", "rgit-2"}
	repos := []names.Repo{rn("a/x"), rn("a/y")}
	owner := map[names.Repo]map[uint64]string{rn("a/x"): {}, rn("a/y"): {}}
	last := map[names.Repo]uint64{}
	seed := uint64(42)
	rnd := func(n int) int { seed = seed*6364136223846793005 + 1442695040888963407; return int(seed>>33) % n }
	now := t0
	for i := 0; i < 5000; i++ {
		now = now.Add(time.Duration(rnd(2000)) * time.Millisecond)
		repo, node := repos[rnd(2)], nodes[rnd(3)]
		switch rnd(4) {
		case 0:
			_, _ = m.Claim(repo, node, now, nil, Options{})
		case 1:
			m.Renew(node, []names.Repo{repo}, now)
		case 2:
			_, _ = m.Release(node, repo, now)
		case 3:
			_, _ = m.ForceGrant(repo, node, nodes[rnd(3)], now)
		}
		e, ok := m.Get(repo)
		if !ok {
			continue
		}
		if e.Epoch < last[repo] {
			t.Fatalf("step %d: epoch went back %d → %d", i, last[repo], e.Epoch)
		}
		last[repo] = e.Epoch
		if prev, seen := owner[repo][e.Epoch]; seen && prev != e.Node {
			t.Fatalf("step %d: epoch %d names %s and %s", i, e.Epoch, prev, e.Node)
		}
		owner[repo][e.Epoch] = e.Node
	}
	if last[rn("a/x")] < 10 {
		t.Fatalf("too few grants exercised: %d", last[rn("a/x")])
	}
}

func TestHandOver(t *testing.T) {
	live := LiveSet{{"rgit-0", 1}, {"rgit-1", 1}, {"rgit-2", 1}}
	others := LiveSet{{"rgit-1", 1}, {"rgit-2", 1}}
	drained := Entry{Node: "rgit-0", Expires: at(500 * time.Millisecond), Written: at(0), Epoch: 4}
	claimed := Entry{Node: "rgit-2", Expires: at(10 * time.Second), Written: at(0), Epoch: 5}
	cases := []struct {
		name  string
		e     Entry
		ok    bool
		live  LiveSet
		to    string // "" : left alone
		epoch uint64
	}{
		{"drained entry goes to the winner among the others", drained, true, live, Rendezvous(rn("a/b"), others), 5},
		{"the leader never wins its own hand-over", drained, true, LiveSet{{"rgit-0", 100}, {"rgit-1", 1}}, "rgit-1", 5},
		{"claimed since the drain: left alone", claimed, true, live, "", 5},
		{"no entry: nothing to move", Entry{}, false, live, "", 0},
		{"no other live node: left alone", drained, true, LiveSet{{"rgit-0", 1}}, "", 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			entries := map[names.Repo]Entry{}
			if tc.ok {
				entries[rn("a/b")] = tc.e
			}
			m := mapWith(entries)
			now := at(time.Second)
			ds := m.HandOver("rgit-0", []names.Repo{rn("a/b")}, tc.live, now)
			if tc.to == "" {
				if len(ds) != 0 {
					t.Fatalf("decisions %+v, want none", ds)
				}
			} else {
				if len(ds) != 1 {
					t.Fatalf("decisions %+v, want one grant", ds)
				}
				d := ds[0]
				want := Entry{Node: tc.to, Expires: now.Add(TTL), Written: now, Epoch: tc.epoch}
				if d.Outcome != Granted || !d.Write || d.Owner != tc.to || d.Entry != want {
					t.Fatalf("decision %+v, want a persisted grant of %+v", d, want)
				}
			}
			if e, _ := m.Get(rn("a/b")); e.Epoch != tc.epoch {
				t.Fatalf("epoch after: %d, want %d", e.Epoch, tc.epoch)
			}
		})
	}
}

// fakeBase is a Base over a Go map.
type fakeBase map[names.Repo]Entry

func (b fakeBase) Get(repo names.Repo) (Entry, bool) { e, ok := b[repo]; return e, ok }
func (b fakeBase) Range(yield func(names.Repo, Entry) bool) {
	for r, e := range b {
		if !yield(r, e) {
			return
		}
	}
}

// Fixed copies b: tests change a fakeBase under the maps over it.
func (b fakeBase) Fixed() Base { return maps.Clone(b) }

// A map over a base reads the base's entries, keeps only its own
// decisions on top, and forgets them once the base holds them.
func TestMapOverBase(t *testing.T) {
	base := fakeBase{rn("a/b"): {Node: "rgit-1", Expires: at(10 * time.Second), Written: t0, Epoch: 3},
		rn("c/d"): {Node: "rgit-1", Expires: at(time.Second), Written: t0, Epoch: 5}}
	m := NewMapOver(DefaultTimings(), base)
	if d, _ := m.Claim(rn("a/b"), "rgit-2", at(time.Second), nil, Options{}); d.Outcome != Refused || d.Owner != "rgit-1" {
		t.Fatalf("claim of a base entry = %+v", d)
	}
	d, _ := m.Claim(rn("c/d"), "rgit-2", at(2*time.Second), nil, Options{})
	if d.Outcome != Granted || d.Entry.Epoch != 6 {
		t.Fatalf("claim of a lapsed base entry = %+v, want epoch 6", d)
	}
	if m.Len() != 2 || len(m.entries) != 1 {
		t.Fatalf("len %d, own entries %d; want 2 and 1", m.Len(), len(m.entries))
	}
	m.Settle() // not committed yet: kept
	if e, _ := m.Get(rn("c/d")); e.Node != "rgit-2" {
		t.Fatalf("decision lost before the base held it: %+v", e)
	}
	base[rn("c/d")] = d.Entry // committed
	m.Settle()
	if len(m.entries) != 0 {
		t.Fatalf("settled map still holds %v", m.entries)
	}
	if e, _ := m.Get(rn("c/d")); e.Node != "rgit-2" || e.Epoch != 6 {
		t.Fatalf("after Settle: %+v", e)
	}
	p := m.Prune(at(2*time.Hour), nil)
	if len(p.Repos) != 2 || m.Len() != 0 {
		t.Fatalf("prune over the base: %+v, len %d", p, m.Len())
	}
}

func TestForceAt(t *testing.T) {
	const quiet = time.Second
	for _, tc := range []struct {
		name string
		e    Entry
		want time.Time
	}{
		{"per-repository lease: the quiet period", Entry{Written: t0, Expires: at(TTL)}, at(quiet)},
		{"bound: the session's expiry", Entry{Written: t0, Expires: at(TTL), Session: 2}, at(TTL)},
		{"bound, expiring within the quiet period: the quiet period", Entry{Written: t0, Expires: at(quiet / 2), Session: 2}, at(quiet)},
	} {
		if got := ForceAt(tc.e, quiet); !got.Equal(tc.want) {
			t.Errorf("%s: ForceAt = %s, want %s", tc.name, got.Sub(t0), tc.want.Sub(t0))
		}
	}
}
