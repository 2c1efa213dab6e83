package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	serving := func(boot string) NodeStatus {
		return NodeStatus{Status: RolloutStatus{State: "serving", BootID: boot, LeaderReachable: true}}
	}
	fleet := func(edit func([]NodeStatus)) []NodeStatus {
		st := []NodeStatus{serving("a"), serving("b"), serving("c")}
		if edit != nil {
			edit(st)
		}
		return st
	}
	cases := []struct {
		name      string
		st        []NodeStatus
		restarted int
		oldBoot   string
		want      string // "" opens
	}{
		{"healthy fleet", fleet(nil), -1, "", ""},
		{"restarted node is back", fleet(nil), 2, "old", ""},
		{"restarted node still the old process", fleet(nil), 2, "c", "node 2 not restarted yet"},
		{"restarted node down", fleet(func(s []NodeStatus) { s[2] = NodeStatus{Err: errors.New("refused")} }), 2, "old", "node 2 not answering"},
		{"restarted node joining", fleet(func(s []NodeStatus) { s[2].Status.State = "joining" }), 2, "old", "node 2 is joining"},
		{"another node draining", fleet(func(s []NodeStatus) { s[1].Status.State = "draining" }), 2, "old", "node 1 is draining"},
		{"repositories mid-drain", fleet(func(s []NodeStatus) { s[0].Status.DrainingRepos = 3 }), 2, "old", "node 0 has 3 repositories mid-drain"},
		{"leader unreachable from a node", fleet(func(s []NodeStatus) { s[1].Status.LeaderReachable = false }), 2, "old", "node 1 does not reach the leader"},
		{"leader map stale", fleet(func(s []NodeStatus) { s[0].Status.MapAgeMs = FreshMapMs + 1 }), 2, "old", "leader's map is"},
		{"leader without a map", fleet(func(s []NodeStatus) { s[0].Status.MapAgeMs = -1 }), 0, "old", "leader's map is"},
		{"a follower's stale map does not hold", fleet(func(s []NodeStatus) { s[1].Status.MapAgeMs = 10 * FreshMapMs }), 2, "old", ""},
	}
	for _, c := range cases {
		ok, why := Gate(c.st, c.restarted, c.oldBoot)
		if ok != (c.want == "") || !strings.Contains(why, c.want) {
			t.Errorf("%s: Gate = %v %q, want %q", c.name, ok, why, c.want)
		}
	}
}

// fakeFleet restarts a node by giving it a new boot id; the node joins
// for a couple of polls first.
type fakeFleet struct {
	st      []RolloutStatus
	joining []int
	updates []int
}

func (f *fakeFleet) Size(context.Context) (int, error) { return len(f.st), nil }
func (f *fakeFleet) Update(_ context.Context, i int) error {
	f.updates = append(f.updates, i)
	f.st[i].BootID += "'"
	f.st[i].State, f.joining[i] = "joining", 2
	return nil
}
func (f *fakeFleet) Status(_ context.Context, i int) (RolloutStatus, error) {
	if f.joining[i] > 0 {
		if f.joining[i]--; f.joining[i] == 0 {
			f.st[i].State = "serving"
		}
	}
	return f.st[i], nil
}

func TestRolloutOrderLeaderLast(t *testing.T) {
	f := &fakeFleet{joining: make([]int, 3)}
	for i := range 3 {
		f.st = append(f.st, RolloutStatus{State: "serving", BootID: fmt.Sprint(i), LeaderReachable: true})
	}
	var log []string
	if _, err := Rollout(context.Background(), f, RolloutOptions{Poll: time.Millisecond, Progress: func(m string) { log = append(log, m) }}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.updates, []int{2, 1, 0}) {
		t.Fatalf("updated %v, want 2, 1, 0", f.updates)
	}
	if !slices.ContainsFunc(log, func(m string) bool { return strings.Contains(m, "node 1 is joining") }) {
		t.Fatalf("the gate never held for a joining node: %q", log)
	}
}

func TestRolloutStopsWhenTheGateStaysShut(t *testing.T) {
	f := &fakeFleet{joining: make([]int, 2)}
	for i := range 2 {
		f.st = append(f.st, RolloutStatus{State: "serving", BootID: fmt.Sprint(i), LeaderReachable: true})
	}
	f.st[0].DrainingRepos = 1
	_, err := Rollout(context.Background(), f, RolloutOptions{Poll: time.Millisecond, Timeout: 20 * time.Millisecond})
	if !errors.Is(err, ErrGateTimeout) || len(f.updates) != 0 {
		t.Fatalf("Rollout = %v after updating %v; want ErrGateTimeout before any update", err, f.updates)
	}
}
