package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
)

func TestPickOpFollowsMix(t *testing.T) {
	for _, tc := range []struct {
		u    float64
		want loadOp
	}{
		{0, opLsRemote}, {0.6999, opLsRemote}, {0.70, opFetch}, {0.8999, opFetch},
		{0.90, opClone}, {0.9499, opClone}, {0.95, opPush}, {0.999999, opPush},
	} {
		if got := pickOp(loadMix, tc.u); got != tc.want {
			t.Errorf("pickOp(%v) = %s, want %s", tc.u, got, tc.want)
		}
	}
	// A mix summing a hair below 1 still picks the last operation.
	if got := pickOp([numLoadOps]float64{0.5, 0.2, 0.2, 0.0999999}, 0.9999999); got != opPush {
		t.Errorf("short mix: got %s, want push", got)
	}
	// Clients get their roles in the mix's shares: 200 clients are 140
	// polling, 40 fetching, 10 cloning and 10 pushing.
	var n [numLoadOps]int
	const clients = 200
	for id := range clients {
		n[pickOp(loadMix, (float64(id)+0.5)/clients)]++
	}
	if want := [numLoadOps]int{140, 40, 10, 10}; n != want {
		t.Errorf("roles of %d clients %v, want %v", clients, n, want)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{ms(1, 2, 3, 4), 99, 4 * time.Millisecond},
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 100, 100 * time.Millisecond},
	} {
		if got := percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("percentile(%d values, %v) = %v, want %v", len(tc.in), tc.p, got, tc.want)
		}
	}
}

// Errors are counted apart and kept out of the latencies and the rate.
func TestOpStatsLine(t *testing.T) {
	var s opStats
	for _, d := range []int{30, 10, 20, 40} {
		s.record(time.Duration(d)*time.Millisecond, nil)
	}
	s.record(time.Hour, errors.New("502 Bad Gateway"))
	got := s.line(opLsRemote, "rgit", 2)
	want := "load op=ls-remote server=rgit ops_per_sec=2.0 p50_ms=20.0 p99_ms=40.0 errors=1"
	if got != want {
		t.Fatalf("line = %q\nwant   %q", got, want)
	}
	re := regexp.MustCompile(`^load op=(ls-remote|fetch|clone|push) server=(rgit|git) ops_per_sec=\d+\.\d p50_ms=\d+\.\d p99_ms=\d+\.\d errors=\d+$`)
	if empty := (&opStats{}).line(opPush, "git", 1); !re.MatchString(empty) {
		t.Errorf("line without samples %q does not match the format", empty)
	}
}

// The cold benchmark's repositories each hold a pack built by hand: it
// must index, hold the commit whose id is returned, and differ per message.
func TestOneCommitPackIndexes(t *testing.T) {
	dir := t.TempDir()
	b1, c1 := oneCommitPack("repository 1\n")
	b2, c2 := oneCommitPack("repository 2\n")
	if c1 == c2 {
		t.Fatal("two messages gave one commit")
	}
	for _, tc := range []struct {
		b []byte
		c object.ID
	}{{b1, c1}, {b2, c2}} {
		ix, err := pack.IndexPack(context.Background(), bytes.NewReader(tc.b), dir, pack.IndexOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, o := range ix.Objects {
			found = found || o.ID == tc.c && o.Type == object.Commit
		}
		if len(ix.Objects) != 2 || !found {
			t.Fatalf("pack objects %+v, want the empty tree and commit %s", ix.Objects, tc.c)
		}
	}
}
