package node

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/frontend/peer"
	"github.com/rgit/rgit/transport/product/admin"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// traffic is the node's traffic state now (trafficState over the node's
// facts). The first time it is serving the node starts claiming.
func (s *Server) traffic() TrafficState {
	in := trafficIn{started: s.started.Load(), draining: s.draining.Load(), served: s.served.Load(),
		cluster: s.cluster != nil, prewarmed: s.prewarmed.Load()}
	if s.node != nil {
		in.mapAge, in.mapOK = s.node.MapAge(time.Now())
	}
	st := trafficState(in)
	if st == Serving && !in.served && s.served.CompareAndSwap(false, true) {
		s.node.Serve()
		s.log.Info("serving: ready for traffic")
	}
	return st
}

// joinPoll is how often a joining node looks at its state.
const joinPoll = 50 * time.Millisecond

// join carries a cluster node through joining: wait for a view of the
// ownership map, prewarm the repositories placement steers here, then
// serve once the view is fresh.
func (s *Server) join(ctx context.Context) {
	if s.cluster != nil {
		for {
			if _, ok := s.node.MapAge(time.Now()); ok {
				break
			}
			if !sleepCtx(ctx, joinPoll) {
				return
			}
		}
		s.prewarm.startup(ctx, s.node, s.cluster.dir.Nodes(), s.cfg.Self, s.cfg.PrewarmBytes)
		go s.prewarm.watch(ctx, s.node)
	}
	s.prewarmed.Store(true)
	for s.traffic() == Joining {
		if !sleepCtx(ctx, joinPoll) {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// rolloutStatus answers admin.RolloutPath.
func (s *Server) rolloutStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.rollout(r.Context())
	if err != nil {
		s.log.Warn("rollout status: list repositories", zap.Error(err))
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// rollout is the node's rollout status: admin.RolloutPath and
// `rgit-admin rollout-status` answer it.
func (s *Server) rollout(ctx context.Context) (admin.RolloutStatus, error) {
	st := admin.RolloutStatus{State: s.traffic().String(), Version: s.version, BootID: s.bootID, MapAgeMs: -1}
	open, err := s.node.OpenRepos(ctx)
	if err == nil {
		var draining []string
		draining, err = s.node.DrainingRepos(ctx)
		st.DrainingRepos = len(draining)
	}
	if err != nil {
		return st, fmt.Errorf("list repositories: %w", err)
	}
	st.OpenRepos = len(open)
	now := time.Now()
	if age, ok := s.node.MapAge(now); ok {
		st.MapAgeMs = age.Milliseconds()
	}
	st.LeaderReachable = s.node.LeaderReachable(now)
	return st, nil
}

// trafficMetric is rgit_traffic_state: 1 for the node's state, 0 for the
// others.
func (s *Server) trafficMetric(reg prometheus.Registerer) {
	for _, st := range []TrafficState{Joining, Serving, Draining} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "rgit_traffic_state",
			Help:        "The node's traffic state: 1 for the current one (joining, serving, draining).",
			ConstLabels: prometheus.Labels{"state": st.String()},
		}, func() float64 {
			if s.traffic() == st {
				return 1
			}
			return 0
		}))
	}
}

// prewarmSlots bounds the repositories prewarmed at once: each downloads
// whole packs, and the requests being served come first.
const prewarmSlots = 2

// prewarmer fetches the packs of repositories this node takes over into
// its cache before the first request needs them.
type prewarmer struct {
	deps    repo.Deps
	log     *zap.Logger
	ctx     context.Context // ends with the node
	slots   chan struct{}
	bytes   prometheus.Counter
	seconds prometheus.Histogram

	mu   sync.Mutex
	busy map[names.Repo]bool // being prewarmed
}

func newPrewarmer(ctx context.Context, d repo.Deps, log *zap.Logger, reg prometheus.Registerer) *prewarmer {
	p := &prewarmer{deps: d, log: log, ctx: ctx, slots: make(chan struct{}, prewarmSlots), busy: map[names.Repo]bool{},
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rgit_prewarm_bytes_total", Help: "Pack, index and bitmap bytes made local by prewarming repositories this node took over or starts with."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rgit_prewarm_seconds", Help: "Time to prewarm one repository.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}),
	}
	reg.MustRegister(p.bytes, p.seconds)
	return p
}

// warm prewarms one repository within budget bytes (≤ 0: all of it) and
// returns the bytes it made local.
func (p *prewarmer) warm(ctx context.Context, name names.Repo, budget int64) int64 {
	start := time.Now()
	n, err := repo.Prewarm(ctx, p.deps, name, budget)
	p.bytes.Add(float64(n))
	p.seconds.Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, repo.ErrNotFound) && ctx.Err() == nil {
		p.log.Warn("prewarm failed; the first request fetches what is missing", zap.Stringer("repo", name), zap.Error(err))
	}
	return n
}

// grant prewarms name in the background (actors.ClusterConfig.OnGrant):
// at once when a slot is free, else queued on one; never twice at a time.
func (p *prewarmer) grant(name names.Repo) {
	p.mu.Lock()
	if p.busy[name] {
		p.mu.Unlock()
		return
	}
	p.busy[name] = true
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			delete(p.busy, name)
			p.mu.Unlock()
		}()
		select {
		case p.slots <- struct{}{}:
		case <-p.ctx.Done():
			return
		}
		defer func() { <-p.slots }()
		p.warm(p.ctx, name, 0)
	}()
}

// watch prewarms the repositories the map starts naming this node for
// before this node asked (the leader's hand-over as it drains, steered
// placement), until ctx ends.
func (p *prewarmer) watch(ctx context.Context, node *actors.Node) {
	var mark actors.MapMark // the zero mark: everything named here is new
	for sleepCtx(ctx, cluster.FollowerPoll*5) {
		var named []names.Repo
		named, mark = node.NewlyNamedHere(mark)
		for _, r := range named {
			p.grant(r)
		}
	}
}

// startup prewarms, within budget bytes, the repositories startupTargets
// picks for this node.
func (p *prewarmer) startup(ctx context.Context, node *actors.Node, nodes []string, self string, budget int64) {
	if budget <= 0 {
		return
	}
	mine := startupTargets(node.MapEntries(), nodes, self)
	start, left, warmed := time.Now(), budget, 0
	for _, r := range mine {
		if left <= 0 || ctx.Err() != nil {
			break
		}
		n := p.warm(ctx, r, left)
		left -= n
		if n > 0 {
			warmed++
		}
	}
	if len(mine) > 0 {
		p.log.Info("start-up prewarm done", zap.Int("repos", warmed), zap.Int("placed_here", len(mine)),
			zap.Int64("bytes", budget-left), zap.Duration("took", time.Since(start)))
	}
}

// startupTargets lists the repositories of the map whose rendezvous
// winner among nodes is self, most recently written (active) first.
// nodes is the static peer list; empty (service mode), the nodes the map
// names and self stand in for it.
func startupTargets(entries []actors.MapEntry, nodes []string, self string) []names.Repo {
	if len(nodes) == 0 {
		nodes = []string{self}
		for _, e := range entries {
			if !slices.Contains(nodes, e.Node) {
				nodes = append(nodes, e.Node)
			}
		}
	}
	live := make(cluster.LiveSet, len(nodes))
	for i, n := range nodes {
		live[i] = cluster.NodeWeight{Node: n, Weight: 1}
	}
	var mine []actors.MapEntry
	for _, e := range entries {
		if cluster.Rendezvous(e.Repo, live) == self {
			mine = append(mine, e)
		}
	}
	slices.SortFunc(mine, func(a, b actors.MapEntry) int {
		return cmp.Or(b.Written.Compare(a.Written), names.Compare(a.Repo, b.Repo))
	})
	out := make([]names.Repo, len(mine))
	for i, e := range mine {
		out[i] = e.Repo
	}
	return out
}

// forwardMetric is rgit_forwarded_requests_total by front end and
// outcome.
func forwardMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rgit_forwarded_requests_total",
		Help: "Requests forwarded to the owning node, by front end (http, ssh) and outcome (ok, moved, connect_failed, error).",
	}, []string{"front", "outcome"})
	// Every series exists from the start: dashboards see zeros.
	for _, front := range []string{"http", "ssh"} {
		for _, o := range []string{"ok", "moved", "connect_failed", "error"} {
			c.WithLabelValues(front, o)
		}
	}
	reg.MustRegister(c)
	return c
}

// forwardOutcome classifies one forward attempt.
func forwardOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, gitserve.ErrMoved):
		return "moved"
	case errors.Is(err, gitserve.ErrPeerConnect):
		return "connect_failed"
	}
	return "error"
}

// countedHTTP counts the HTTP front end's forwards (Moved is promoted, so
// gitserve still follows moved answers through it).
type countedHTTP struct {
	*peer.HTTPForwarder
	m *prometheus.CounterVec
}

func (f countedHTTP) Forward(w http.ResponseWriter, r *http.Request, node string) error {
	err := f.HTTPForwarder.Forward(w, r, node)
	f.m.WithLabelValues("http", forwardOutcome(err)).Inc()
	return err
}

// countedSessions counts forwarded git sessions (SSH, and the peer stream
// port's own forwards).
type countedSessions struct {
	*peer.SessionClient
	m *prometheus.CounterVec
}

func (c countedSessions) ForwardSession(ctx context.Context, node string, req gitserve.SessionRequest, in io.Reader, out io.Writer) (gitserve.Stats, error) {
	st, err := c.SessionClient.ForwardSession(ctx, node, req, in, out)
	c.m.WithLabelValues("ssh", forwardOutcome(err)).Inc()
	return st, err
}

// pathPrewarm is the peer stream port's prewarm hint: a draining node
// names the repositories the receiver is about to take over.
const pathPrewarm = "/peer/v1/prewarm"

// maxHintRepos bounds one hint's list.
const maxHintRepos = 10000

// prewarmHint is pathPrewarm's body.
type prewarmHint struct {
	Repos []string `json:"repos"`
}

// hinted prewarms the repositories a draining peer names (pathPrewarm).
func (p *prewarmer) hinted(w http.ResponseWriter, r *http.Request) {
	var h prewarmHint
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&h); err != nil || len(h.Repos) > maxHintRepos {
		http.Error(w, "bad prewarm hint: want {\"repos\": [owner/name, …]} of at most 10000", http.StatusBadRequest)
		return
	}
	for _, repo := range h.Repos {
		if r, err := names.Parse(repo); err == nil {
			p.grant(r)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// successors groups repos by the node each moves to when self leaves: the
// rendezvous winner among the other nodes, as the leader steers a
// released repository when every node weighs the same.
func successors(repos []string, self string, nodes []string) map[string][]string {
	var live cluster.LiveSet
	for _, n := range nodes {
		if n != self {
			live = append(live, cluster.NodeWeight{Node: n, Weight: 1})
		}
	}
	out := map[string][]string{}
	for _, r := range repos {
		rn, err := names.Parse(r)
		if err != nil {
			continue
		}
		if to := cluster.Rendezvous(rn, live); to != "" {
			out[to] = append(out[to], r)
		}
	}
	return out
}

// hintSuccessors tells the nodes that take this draining node's open
// repositories over to prewarm them now, while the drain still serves
// them here. The candidates are the members with a live session in the
// map view, not the peer list: a static map may name nodes that do not
// run, and the headless service names none. Best effort and bounded: a
// lost hint costs a cold first request.
func (s *Server) hintSuccessors(ctx context.Context) {
	var nodes []string
	for _, m := range s.node.Members(time.Now()) {
		if m.Live {
			nodes = append(nodes, m.Node)
		}
	}
	open, err := s.node.OpenRepos(ctx)
	if err != nil || len(open) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for node, repos := range successors(open, s.cfg.Self, nodes) {
		if len(repos) > maxHintRepos {
			repos = repos[:maxHintRepos]
		}
		addr, err := s.cluster.dir.StreamAddr(node)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(prewarmHint{Repos: repos})
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+pathPrewarm, bytes.NewReader(body))
			if err != nil {
				return
			}
			req.Header.Set("Authorization", "Bearer "+s.PeerSecret)
			peer.SetVersion(req.Header)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				s.log.Info("prewarm hint not delivered", zap.String("to", node), zap.Error(err))
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
}
