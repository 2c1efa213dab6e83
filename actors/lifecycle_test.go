package actors

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
)

func holder(s cluster.HolderState) *cluster.Holder { return &cluster.Holder{State: s} }

func TestOnIdleTimer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const ttl = time.Minute
	cases := []struct {
		name     string
		l        life
		last     time.Time
		want     idleVerdict
		wantWait time.Duration
	}{
		{"used since armed: wait the rest", life{open: true}, t0.Add(-20 * time.Second), rearmIdle, 40 * time.Second},
		{"used since armed but closing", life{open: true, closing: true}, t0.Add(-20 * time.Second), stayOpen, 0},
		{"used since armed but never opened", life{}, t0.Add(-20 * time.Second), stayOpen, 0},
		{"idle, single node: close", life{open: true}, t0.Add(-ttl), closeIdle, 0},
		{"idle with a session: stay", life{open: true, sessions: 1}, t0.Add(-2 * ttl), stayOpen, 0},
		{"idle with webhook deliveries waiting: stay", life{open: true, deliveries: true}, t0.Add(-2 * ttl), stayOpen, 0},
		{"idle, cluster serving: release", life{open: true, lease: holder(cluster.Serving)}, t0.Add(-ttl), releaseLease, 0},
		{"idle, cluster draining: let the drain end", life{open: true, lease: holder(cluster.Draining)}, t0.Add(-ttl), stayOpen, 0},
		{"idle but closing", life{open: true, closing: true}, t0.Add(-ttl), stayOpen, 0},
	}
	for _, c := range cases {
		got, wait := onIdleTimer(c.l, c.last, t0, ttl)
		if got != c.want || wait != c.wantWait {
			t.Errorf("%s: onIdleTimer = %s, %v; want %s, %v", c.name, got, wait, c.want, c.wantWait)
		}
	}
}

func TestOnEvict(t *testing.T) {
	cases := []struct {
		l    life
		want idleVerdict
	}{
		{life{open: true}, closeIdle},
		{life{open: true, sessions: 2}, stayOpen},
		{life{open: true, closing: true}, stayOpen},
		{life{open: true, lease: holder(cluster.Serving)}, releaseLease},
		{life{open: true, lease: holder(cluster.Serving), sessions: 1}, stayOpen},
		{life{open: true, deliveries: true}, stayOpen},
		{life{open: true, lease: holder(cluster.Serving), deliveries: true}, stayOpen},
		{life{open: true, lease: holder(cluster.Draining)}, stayOpen},
		{life{open: true, lease: holder(cluster.Closed)}, stayOpen},
	}
	for _, c := range cases {
		if got := onEvict(c.l); got != c.want {
			t.Errorf("onEvict(%+v) = %s, want %s", c.l, got, c.want)
		}
	}
}

func TestOnRequest(t *testing.T) {
	bad := errors.New("open failed")
	cases := []struct {
		closing bool
		openErr error
		want    sessionVerdict
	}{
		{false, nil, serveRequest},
		{true, nil, retryElsewhere},
		{true, bad, retryElsewhere}, // already closing after answering the error once
		{false, bad, failOpen},
	}
	for _, c := range cases {
		if got := onRequest(c.closing, c.openErr); got != c.want {
			t.Errorf("onRequest(%v, %v) = %d, want %d", c.closing, c.openErr, got, c.want)
		}
	}
}

func TestReleaseOnClose(t *testing.T) {
	cases := []struct {
		why   closeWhy
		lease *cluster.Holder
		want  bool
	}{
		{whyOpenFailed, holder(cluster.Serving), true},
		{whyClosed, holder(cluster.Serving), true},
		{whyShutdown, holder(cluster.Serving), false}, // a shutdown looks like a crash
		{whyFenced, holder(cluster.Closed), false},    // someone else holds it
		{whyLeaseEnded, holder(cluster.Closed), false},
		{whyClosed, holder(cluster.Draining), false}, // released when the drain began
		{whyClosed, nil, false},                      // single node
		{whyIdle, nil, false},
		{whyLingered, holder(cluster.Closed), true}, // the entry held for the sessions
	}
	for _, c := range cases {
		if got := releaseOnClose(c.why, c.lease); got != c.want {
			t.Errorf("releaseOnClose(%s, %v) = %v, want %v", c.why, c.lease, got, c.want)
		}
	}
}

func TestEvictions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pool := []warmChild{{rn("a/x"), at(3)}, {rn("a/y"), at(1)}, {rn("a/z"), at(2)}, {rn("a/new"), at(0)}}
	cases := []struct {
		name    string
		pool    []warmChild
		fresh   names.Repo
		maxWarm int
		want    []names.Repo
	}{
		{"within the bound", pool, rn("a/new"), 4, nil},
		{"one over: least recently used", pool, rn("a/new"), 3, []names.Repo{rn("a/y")}},
		{"two over, never the fresh one", pool, rn("a/new"), 2, []names.Repo{rn("a/y"), rn("a/z")}},
		{"bound below the pool: all but fresh", pool, rn("a/new"), 0, []names.Repo{rn("a/y"), rn("a/z"), rn("a/x")}},
		{"ties broken by name", []warmChild{{rn("a/b"), at(1)}, {rn("a/a"), at(1)}, {rn("a/c"), at(5)}}, rn("a/c"), 2, []names.Repo{rn("a/a")}},
	}
	for _, c := range cases {
		if got := evictions(c.pool, c.fresh, c.maxWarm); !slices.Equal(got, c.want) {
			t.Errorf("%s: evictions = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestIsActivity(t *testing.T) {
	for _, m := range []any{&acquire{}, &release{}, &updateRefs{}, &setVisibility{}, &setHead{}, &commitRepack{}, &planGC{}, &closeRepo{},
		&addHook{}, &removeHook{}, &redeliver{}} {
		if !isActivity(m) {
			t.Errorf("%T does not count as use", m)
		}
	}
	for _, m := range []any{&idleTick{}, &drainTick{}, &renewAnswer{}, &regranted{}, &startRelease{}, &evictIfIdle{},
		&readOutbox{}, &finishDeliveries{}} {
		if isActivity(m) {
			t.Errorf("%T counts as use: the lifecycle's own messages would keep an unused repository open", m)
		}
	}
}

func TestOnSessionAndLeaseClosed(t *testing.T) {
	if onSession(true) != retryElsewhere || onSession(false) != serveRequest {
		t.Error("a lingering actor must refuse new sessions, and only it")
	}
	cases := []struct {
		ev       cluster.EventKind
		sessions int
		want     closeVerdict
	}{
		{cluster.EvTick, 0, closeAtOnce},
		{cluster.EvTick, 2, lingerThenClose}, // drained: admitted sessions finish
		{cluster.EvRenewDeclined, 2, closeAtOnce},
		{cluster.EvFenced, 1, closeAtOnce},
	}
	for _, c := range cases {
		if got := onLeaseClosed(c.ev, c.sessions); got != c.want {
			t.Errorf("onLeaseClosed(%s, %d) = %d, want %d", c.ev, c.sessions, got, c.want)
		}
	}
}

func rn(s string) names.Repo { return names.MustParse(s) }
