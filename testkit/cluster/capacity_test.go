package cluster

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rgit/rgit/testkit/scale"
)

// benchFigures are the model's inputs measured by `rgit-bench cluster
// -lease-only` (docs/capacity.md), with the leader's CPU at zero: in fake
// time deciding costs nothing.
var benchFigures = Figures{Write: 100 * time.Millisecond, RenewBytes: 72, HorizonBytes: 60}

func TestCapacityModel(t *testing.T) {
	loaded := Figures{Write: 100 * time.Millisecond, ClaimCPU: 88 * time.Microsecond, RenewBytes: 72, HorizonBytes: 60}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"claims/s c=1", benchFigures.ClaimsPerSec(1), 10},
		{"claims/s c=512 fake time", benchFigures.ClaimsPerSec(512), 5120},
		{"claims/s c=512 loaded", loaded.ClaimsPerSec(512), 512 / (0.1 + 512*88e-6)},
		{"claims/s saturates at 1/cpu", loaded.ClaimsPerSec(1 << 30), 1 / 88e-6},
		{"renew writes, 10 nodes: one each", benchFigures.RenewWrites(10), 10},
		{"renew writes, 50 nodes: one in flight", benchFigures.RenewWrites(50), 30},
		{"renew bytes, 50 nodes: 50 sessions, 30 horizons", benchFigures.RenewBytesPerRound(50), 50*72 + 30*60},
		{"claim time, 1000 by 512: 1, 511, 488", benchFigures.ClaimTime(1000, 512).Seconds(), 0.3},
		{"claim time, 1 by 512", benchFigures.ClaimTime(1, 512).Seconds(), 0.1},
		{"claims per request, 1 node", ClaimsPerRequest(1), 1},
		{"claims per request, 50 nodes", ClaimsPerRequest(50), 1.98},
		{"leader busy, 5 nodes", benchFigures.LeaderBusy(5), 5 * 0.1 / 3},
		{"leader busy, 50 nodes", benchFigures.LeaderBusy(50), 1},
		{"serve all, 1000 by 512, 1 node", benchFigures.ServeAll(1000, 512, 1, time.Second).Seconds(), 2 * (1 + 0.1*(1-0.1/3))},
		{"serve all, 1000 by 512, 50 nodes", benchFigures.ServeAll(1000, 512, 50, time.Second).Seconds(), 2},
		{"serve all, leader-bound", loaded.ServeAll(100000, 512, 50, 10*time.Millisecond).Seconds(), 1.98 * 100000 / loaded.ClaimsPerSec(512)},
		{"moves, 50 + 10", ScaleOutMoves(100000, 50, 10), 100000.0 / 6},
		{"scale-out time, 100 moves by 4", ScaleOutTime(100, 4).Seconds(), 25 * 4.5},
	} {
		if math.Abs(tc.got-tc.want) > 1e-5*math.Max(1, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// TestCapacity checks the model against the in-process cluster in fake
// time (claims, renewals, a rolling restart, a scale-out), prints each
// figure predicted beside the one measured (`capacity op=…` lines), and
// fails when one is further from the model than its tolerance
// (CapacityResult.Misses). It runs small by default; the size of
// docs/capacity.md is
//
//	RGIT_CAPACITY_NODES=50 RGIT_CAPACITY_REPOS=100000 RGIT_CAPACITY_MOVES=64 \
//	  go test ./testkit/cluster -run 'TestCapacity$' -v -timeout 3h
//
// (RGIT_CAPACITY_NODES/5 nodes join for the scale-out.)
func TestCapacity(t *testing.T) {
	nodes := scale.Count(t, "RGIT_CAPACITY_NODES", 5)
	cfg := CapacityConfig{
		Nodes: nodes, Repos: scale.Count(t, "RGIT_CAPACITY_REPOS", 1000), Added: max(1, nodes/5),
		Concurrency: 512, Rebalance: scale.Count(t, "RGIT_CAPACITY_MOVES", 4),
		Write: benchFigures.Write, Rounds: 10, Seed: 1,
	}
	cfg.Progress = func(phase string, at time.Duration) { t.Logf("%s at %s of fake time", phase, at) }
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		r, err := MeasureCapacity(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		r.Lines(&b, benchFigures)
		os.Stdout.WriteString(b.String())
		for _, m := range r.Misses(benchFigures) {
			t.Error(m)
		}
	})
}
