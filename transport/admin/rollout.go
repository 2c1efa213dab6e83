package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rgit/rgit/transport/peer"
)

// RolloutPath is the rollout status endpoint on a node's peer HTTP port
// (the peer secret in peer.HeaderSecret).
const RolloutPath = "/status/rollout"

// RolloutStatus is a node's answer on RolloutPath: what the rollout gate
// reads before it restarts the next node.
type RolloutStatus struct {
	// State is the traffic state: joining, serving or draining.
	State   string `json:"state"`
	Version string `json:"version"`
	// BootID is random per process: the gate sees a restart happen.
	BootID    string `json:"boot_id"`
	OpenRepos int    `json:"open_repos"`
	// DrainingRepos counts repositories whose lease is being released
	// through a drain (mid-hand-over).
	DrainingRepos int `json:"draining_repos"`
	// MapAgeMs is how old the node's view of the ownership map is; -1:
	// it has none yet.
	MapAgeMs        int64 `json:"map_age_ms"`
	LeaderReachable bool  `json:"leader_reachable"`
}

// Text is the status as one JSON object: what `rgit-admin rollout-status`
// prints and the rollout gate parses, with or without --json.
func (st RolloutStatus) Text() string {
	b, _ := json.Marshal(st) // cannot fail: strings, numbers, a bool
	return string(b)
}

func (s *Server) rolloutStatus(ctx context.Context, _ ShowRollout) (RolloutStatus, error) {
	if s.Rollout == nil {
		return RolloutStatus{}, errors.New("rollout-status: this node does not report one")
	}
	return s.Rollout(ctx)
}

// FetchRollout reads the rollout status of the node whose peer HTTP port
// is addr.
func FetchRollout(ctx context.Context, addr, secret string) (RolloutStatus, error) {
	var st RolloutStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+RolloutPath, nil)
	if err != nil {
		return st, err
	}
	req.Header.Set(peer.HeaderSecret, secret)
	peer.SetVersion(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("rollout status of %s: %s: %s", addr, resp.Status, b)
		if resp.StatusCode == http.StatusUnauthorized {
			err = fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return st, err
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("rollout status of %s: %w", addr, err)
	}
	return st, nil
}

// FreshMapMs is the oldest map view (in ms) the gate accepts on the
// leader: a leader that has not loaded its map, or lost its store, holds
// the rollout.
const FreshMapMs = 2000

// NodeStatus is one node's rollout status as the gate polled it.
type NodeStatus struct {
	Status RolloutStatus
	Err    error // the node did not answer
}

// Gate decides whether a rollout may go on after node restarted (its
// index in st; the leader, ordinal 0, is st[0]) was restarted from the
// process whose boot id was oldBoot ("" when it was not answering): the
// restarted node runs a new process and serves; every node answers,
// serves, reaches the leader and has no repository mid-drain; the
// leader's map is fresh. restarted < 0 checks the fleet alone (before
// the first restart). The reason names what holds it.
func Gate(st []NodeStatus, restarted int, oldBoot string) (ok bool, reason string) {
	if restarted >= 0 {
		s := st[restarted]
		switch {
		case s.Err != nil:
			return false, fmt.Sprintf("node %d not answering: %v", restarted, s.Err)
		case s.Status.BootID == oldBoot:
			return false, fmt.Sprintf("node %d not restarted yet", restarted)
		}
	}
	for i, s := range st {
		switch {
		case s.Err != nil:
			return false, fmt.Sprintf("node %d not answering: %v", i, s.Err)
		case s.Status.State != "serving":
			return false, fmt.Sprintf("node %d is %s", i, s.Status.State)
		case s.Status.DrainingRepos > 0:
			return false, fmt.Sprintf("node %d has %d repositories mid-drain", i, s.Status.DrainingRepos)
		case !s.Status.LeaderReachable:
			return false, fmt.Sprintf("node %d does not reach the leader", i)
		}
	}
	if len(st) > 0 {
		if age := st[0].Status.MapAgeMs; age < 0 || age > FreshMapMs {
			return false, fmt.Sprintf("leader's map is %d ms old", age)
		}
	}
	return true, ""
}

// Fleet is what a rollout acts on: a Kubernetes StatefulSet (rgit-admin
// rollout) or local processes (tests).
type Fleet interface {
	// Size is the number of nodes (ordinals 0..Size-1).
	Size(ctx context.Context) (int, error)
	// Update starts replacing node i with the new version and returns
	// (the gate waits for the new process).
	Update(ctx context.Context, i int) error
	// Status reads node i's rollout status.
	Status(ctx context.Context, i int) (RolloutStatus, error)
}

// RolloutOptions tune Rollout.
type RolloutOptions struct {
	Poll    time.Duration // between gate checks; default 250ms
	Timeout time.Duration // per node, for the gate to open; default 10m
	// Progress, if set, hears each step and each reason the gate holds.
	Progress func(msg string)
}

// ErrGateTimeout: the gate did not open within RolloutOptions.Timeout;
// the rollout stops with the remaining nodes on the old version.
var ErrGateTimeout = errors.New("rollout gate did not open")

// Rollout updates the fleet one node at a time, highest ordinal first and
// the leader (ordinal 0) last, each only once Gate opens for the fleet,
// and after the last node once more. It returns how long it took.
func Rollout(ctx context.Context, f Fleet, o RolloutOptions) (time.Duration, error) {
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	say := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	start := time.Now()
	n, err := f.Size(ctx)
	if err != nil {
		return 0, err
	}
	if err := waitGate(ctx, f, n, -1, "", o, say); err != nil {
		return time.Since(start), err
	}
	for i := n - 1; i >= 0; i-- {
		old, err := f.Status(ctx, i)
		if err != nil {
			return time.Since(start), fmt.Errorf("node %d before its update: %w", i, err)
		}
		say("updating node %d (version %s)", i, old.Version)
		if err := f.Update(ctx, i); err != nil {
			return time.Since(start), fmt.Errorf("update node %d: %w", i, err)
		}
		if err := waitGate(ctx, f, n, i, old.BootID, o, say); err != nil {
			return time.Since(start), err
		}
		st, _ := f.Status(ctx, i)
		say("node %d serving (version %s) after %s", i, st.Version, time.Since(start).Round(time.Millisecond))
	}
	return time.Since(start), nil
}

// waitGate polls every node until Gate opens.
func waitGate(ctx context.Context, f Fleet, n, restarted int, oldBoot string, o RolloutOptions, say func(string, ...any)) error {
	deadline := time.Now().Add(o.Timeout)
	last := ""
	for {
		st := make([]NodeStatus, n)
		for i := range st {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st[i].Status, st[i].Err = f.Status(sctx, i)
			cancel()
		}
		ok, why := Gate(st, restarted, oldBoot)
		if ok {
			return nil
		}
		if why != last {
			say("waiting: %s", why)
			last = why
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %s: %s", ErrGateTimeout, o.Timeout, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Poll):
		}
	}
}
