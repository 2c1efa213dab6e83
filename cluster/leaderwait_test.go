package cluster

import (
	"testing"
	"time"
)

func TestOnLeaderUnreachable(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	live := Entry{Node: "rgit-1", Epoch: 3, Expires: t0.Add(5 * time.Second)}
	other := Entry{Node: "rgit-2", Epoch: 3, Expires: t0.Add(5 * time.Second)}
	expired := Entry{Node: "rgit-1", Epoch: 3, Expires: t0.Add(-time.Second)}
	const wait = 5 * time.Second
	for _, tc := range []struct {
		name     string
		e        Entry
		ok       bool
		claim    bool
		now      time.Time
		answered bool
		lapsed   bool // the node's ServeLease does not cover the entry
		want     LeaderAbsence
	}{
		{"handed over to self: adopt", live, true, true, t0, false, false, LeaderAbsence{Kind: AbsenceAdopt}},
		{"handed over, late in the wait: adopt", live, true, true, t0.Add(4 * time.Second), false, false, LeaderAbsence{Kind: AbsenceAdopt}},
		{"own entry, lease ended (no renewal for its length): wait", live, true, true, t0, false, true, LeaderAbsence{Kind: AbsenceWait, At: t0.Add(LeaderRetry)}},
		{"force-grant never adopts", live, true, false, t0, false, false, LeaderAbsence{Kind: AbsenceWait, At: t0.Add(LeaderRetry)}},
		{"view caught up with a grant elsewhere: forward", other, true, true, t0.Add(time.Second), false, false, LeaderAbsence{Kind: AbsenceForward, Node: "rgit-2"}},
		{"force-grant does not follow the view", other, true, false, t0, false, false, LeaderAbsence{Kind: AbsenceWait, At: t0.Add(LeaderRetry)}},
		{"own entry expired: wait", expired, true, true, t0, false, false, LeaderAbsence{Kind: AbsenceWait, At: t0.Add(LeaderRetry)}},
		{"no entry: wait", Entry{}, false, true, t0.Add(time.Second), false, false, LeaderAbsence{Kind: AbsenceWait, At: t0.Add(time.Second + LeaderRetry)}},
		{"the leader answered the node: ask again", Entry{}, false, true, t0.Add(time.Second), true, false, LeaderAbsence{Kind: AbsenceRetry}},
		{"last look lands on the bound", Entry{}, false, true, t0.Add(wait - LeaderRetry/2), false, false, LeaderAbsence{Kind: AbsenceWait, At: t0.Add(wait)}},
		{"bound reached: give up", Entry{}, false, true, t0.Add(wait), true, false, LeaderAbsence{Kind: AbsenceGiveUp}},
		{"past the bound: give up", other, true, false, t0.Add(time.Minute), false, false, LeaderAbsence{Kind: AbsenceGiveUp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := OnLeaderUnreachable(tc.e, tc.ok, tc.claim, "rgit-1", !tc.lapsed, t0, tc.now, wait, tc.answered)
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := OnLeaderUnreachable(Entry{}, false, true, "rgit-1", true, t0, t0, 0, false); got.Kind != AbsenceGiveUp {
		t.Fatalf("no wait configured: %+v, want give up at once", got)
	}
}
