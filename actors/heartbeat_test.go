package actors

import (
	"reflect"
	"testing"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

// countingView is a map view that counts its lookups.
type countingView struct {
	m       map[names.Repo]cluster.Entry
	lookups int
}

func (v *countingView) Get(r names.Repo) (cluster.Entry, bool) {
	v.lookups++
	e, ok := v.m[r]
	return e, ok
}

func TestHeartbeatLosses(t *testing.T) {
	a, b, c, d := names.MustParse("o/a"), names.MustParse("o/b"), names.MustParse("o/c"), names.MustParse("o/d")
	// Every child holds epoch 5 under session 3; the view shows them so.
	children := func() map[names.Repo]*child {
		out := map[names.Repo]*child{}
		for _, k := range []names.Repo{a, b, c, d} {
			out[k] = &child{epoch: 5, session: 3, renews: true}
		}
		return out
	}
	mine := cluster.Entry{Node: "rgit-1", Epoch: 5, Session: 3}
	view := func(over map[names.Repo]cluster.Entry) *countingView {
		v := &countingView{m: map[names.Repo]cluster.Entry{a: mine, b: mine, c: mine, d: mine}}
		for k, e := range over {
			v.m[k] = e
		}
		return v
	}
	elsewhere := cluster.Entry{Node: "rgit-2", Epoch: 6, Session: 9}
	renewed := cluster.LeasesRenewed{Session: 3}
	for _, tc := range []struct {
		name     string
		kids     func(map[names.Repo]*child)
		reply    cluster.LeasesRenewed
		listed   map[names.Repo]uint64
		over     map[names.Repo]cluster.Entry
		changed  []names.Repo
		all      bool
		want     []toldLease
		lookups  int
		unbounds []names.Repo
	}{
		{name: "nothing changed: no lookup, none told", reply: renewed},
		{name: "granted elsewhere, changed", reply: renewed, over: map[names.Repo]cluster.Entry{b: elsewhere},
			changed: []names.Repo{b}, want: []toldLease{{b, 5}}, lookups: 1},
		// Unchanged since the last check, so not looked up (and it was
		// told then): the cost of a heartbeat is what changed.
		{name: "granted elsewhere, unchanged", reply: renewed, over: map[names.Repo]cluster.Entry{b: elsewhere}},
		{name: "changed, still ours", reply: renewed, changed: []names.Repo{a, c}, lookups: 2},
		{name: "granted to another session of this node", reply: renewed,
			over:    map[names.Repo]cluster.Entry{c: {Node: "rgit-1", Epoch: 7, Session: 4}},
			changed: []names.Repo{c}, want: []toldLease{{c, 5}}, lookups: 1},
		{name: "view behind the grant", reply: renewed, over: map[names.Repo]cluster.Entry{a: {Node: "rgit-2", Epoch: 4, Session: 9}},
			changed: []names.Repo{a}, lookups: 1},
		{name: "changed but draining: not told", reply: renewed, kids: func(k map[names.Repo]*child) { k[b].renews = false },
			over: map[names.Repo]cluster.Entry{b: elsewhere}, changed: []names.Repo{b}, lookups: 1},
		{name: "changed, no longer a child", reply: renewed, kids: func(k map[names.Repo]*child) { delete(k, b) },
			over: map[names.Repo]cluster.Entry{b: elsewhere}, changed: []names.Repo{b}},
		{name: "session changed: all checked", reply: renewed, over: map[names.Repo]cluster.Entry{d: elsewhere},
			all: true, want: []toldLease{{d, 5}}, lookups: 4},
		{name: "session declined: its leases all told, nothing looked up",
			kids:  func(k map[names.Repo]*child) { k[c].session, k[d].renews = 4, false },
			reply: cluster.LeasesRenewed{SessionDeclined: true, Session: 4}, changed: []names.Repo{a},
			want: []toldLease{{a, 5}, {b, 5}, {d, 5}}},
		{name: "listed and declined, at the listed epoch", kids: func(k map[names.Repo]*child) { k[a].epoch = 8 },
			reply: cluster.LeasesRenewed{Session: 3, Declined: []names.Repo{a, c}}, listed: map[names.Repo]uint64{a: 5},
			want: []toldLease{{a, 5}}},
		{name: "declined and changed: told once", reply: cluster.LeasesRenewed{Session: 3, Declined: []names.Repo{b}},
			listed: map[names.Repo]uint64{b: 5}, over: map[names.Repo]cluster.Entry{b: elsewhere}, changed: []names.Repo{b, b},
			want: []toldLease{{b, 5}}, lookups: 2},
		{name: "bound since: no longer listed", kids: func(k map[names.Repo]*child) { k[a].unbound, k[b].unbound = true, true },
			reply: renewed, over: map[names.Repo]cluster.Entry{b: {Node: "rgit-1", Epoch: 5}}, changed: []names.Repo{a, b},
			lookups: 2, unbounds: []names.Repo{b}},
	} {
		kids := children()
		if tc.kids != nil {
			tc.kids(kids)
		}
		v := view(tc.over)
		got := heartbeatLosses(kids, heartbeatCheck{self: "rgit-1", session: 3, reply: tc.reply, listed: tc.listed,
			changed: tc.changed, all: tc.all, view: v})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: told %v, want %v", tc.name, got, tc.want)
		}
		if v.lookups != tc.lookups {
			t.Errorf("%s: %d lookups, want %d", tc.name, v.lookups, tc.lookups)
		}
		var unbounds []names.Repo
		for _, k := range sortedKeys(kids) {
			if kids[k].unbound {
				unbounds = append(unbounds, k)
			}
		}
		if !reflect.DeepEqual(unbounds, tc.unbounds) {
			t.Errorf("%s: unbound %v, want %v", tc.name, unbounds, tc.unbounds)
		}
	}
}
