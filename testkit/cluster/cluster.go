// Package cluster is an in-process rgit cluster for tests: N actors.Node
// members over one fault-injecting in-memory object store, a simulated
// peer network implementing cluster.LeaderService between them (delay, drop,
// partition, kill, restart) and front-end style request routing (route,
// forward with the hop limit, connect-failure handling for GET).
//
// Run it inside a testing/synctest bubble (synctest.Test) so time is fake:
// TTLs, renewals, drains and the follower's polling then advance only when
// every goroutine is blocked, and a scenario runs the same way every time.
// It also records the lease epoch of every acknowledged commit so tests
// can check that one epoch never had two writers. It may import anything
// (it is test infrastructure); only tests import it.
package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	rc "github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/testkit/faultstore"
)

// Errors of the simulated network and front end.
var (
	// ErrConnect: the simulated connection could not be made (node down,
	// partitioned, or a dropped connect).
	ErrConnect = errors.New("simulated connect failure")
	// ErrHopLimit: a request was forwarded more than MaxHops times.
	ErrHopLimit = errors.New("hop limit reached")
	// ErrNodeDown: the entry node of a request is not running.
	ErrNodeDown = errors.New("node not running")
)

// MaxHops is the forwarding hop limit (X-Rgit-Hop).
const MaxHops = 2

// Options configure a Cluster.
type Options struct {
	Nodes   int           // number of nodes; rgit-0 is the leader
	Seed    int64         // fault store seed
	WarmTTL time.Duration // repo idle TTL; default 5 minutes
	MaxWarm int           // default 64
	Log     *zap.Logger
	// Stagger starts node i at i×Stagger rather than all at once: nodes
	// started at one instant run their periodic work (renewals, map polls)
	// at one instant too, in an order the Go scheduler picks.
	Stagger time.Duration
	// Steer and Weights are the leader's placement settings
	// (actors.ClusterConfig).
	Steer   actors.SteerMode
	Weights map[string]float64
	// Rebalance is the leader's moves at once (actors.ClusterConfig);
	// 0: off.
	Rebalance int
	// Spare nodes are named after the Nodes but not started: a scale-out
	// starts them (Restart), as a static map may name more nodes than run.
	Spare int
}

// Cluster is the in-process cluster.
type Cluster struct {
	Store *faultstore.Store
	Net   *Network
	opts  Options
	names []string

	mu      sync.Mutex
	nodes   map[string]*actors.Node // nil while killed
	writers map[epochKey]string     // (repo, epoch) → node that committed
	dup     []string                // violations: two writers in one epoch
	// cache models each node's local pack cache on a persistent volume:
	// the repositories it ever served, kept across restarts.
	cache               map[string]map[string]bool
	cacheHits, accesses int
	// lastRenewal is each follower's last session renewal, for replaying
	// it late (ReplayRenewal).
	lastRenewal map[string]rc.RenewLeases
}

type epochKey struct {
	repo  string
	epoch uint64
}

// New starts opts.Nodes nodes named rgit-0 … rgit-{N-1}, and names
// opts.Spare more after them.
func New(opts Options) (*Cluster, error) {
	if opts.Nodes <= 0 {
		return nil, fmt.Errorf("cluster: %d nodes", opts.Nodes)
	}
	if opts.WarmTTL <= 0 {
		opts.WarmTTL = 5 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	c := &Cluster{
		Store:   faultstore.New(memstore.New(), opts.Seed),
		Net:     newNetwork(),
		opts:    opts,
		nodes:   map[string]*actors.Node{},
		writers: map[epochKey]string{},
		cache:   map[string]map[string]bool{},

		lastRenewal: map[string]rc.RenewLeases{},
	}
	for i := range opts.Nodes + opts.Spare {
		c.names = append(c.names, fmt.Sprintf("rgit-%d", i))
	}
	for _, n := range c.names[opts.Nodes:] {
		c.Net.setDown(n, true)
	}
	for i, n := range c.names[:opts.Nodes] {
		if i > 0 && opts.Stagger > 0 {
			time.Sleep(opts.Stagger)
		}
		if err := c.start(n); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Names lists the node names in order.
func (c *Cluster) Names() []string { return slices.Clone(c.names) }

// Leader is the leader's name.
func (c *Cluster) Leader() string { return c.names[0] }

// Node returns the running node, or nil while it is killed.
func (c *Cluster) Node(name string) *actors.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[name]
}

// Deps are the repository dependencies every node shares.
func (c *Cluster) Deps() repo.Deps { return repo.Deps{Store: c.Store, Log: c.opts.Log} }

func (c *Cluster) start(name string) error {
	cfg := &actors.ClusterConfig{Self: name, Steer: c.opts.Steer, Weights: c.opts.Weights, Rebalance: c.opts.Rebalance}
	if name != c.Leader() {
		cfg.Leader = &peerClient{c: c, from: name}
	}
	n, err := actors.NewNode(actors.Config{
		Deps: c.Deps(), WarmTTL: c.opts.WarmTTL, MaxWarm: c.opts.MaxWarm, Log: c.opts.Log.With(zap.String("node", name)), Cluster: cfg,
	})
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	c.mu.Lock()
	c.nodes[name] = n
	c.mu.Unlock()
	return nil
}

// Kill stops a node the way a crash would: it stops answering at once and
// its actors stop without releasing any lease.
func (c *Cluster) Kill(name string) error {
	c.Net.setDown(name, true)
	c.mu.Lock()
	n := c.nodes[name]
	c.nodes[name] = nil
	c.mu.Unlock()
	if n == nil {
		return fmt.Errorf("kill %s: %w", name, ErrNodeDown)
	}
	return n.Shutdown(context.Background())
}

// Restart starts a killed node again with empty memory, or a spare one
// for the first time.
func (c *Cluster) Restart(name string) error {
	if c.Node(name) != nil {
		return fmt.Errorf("restart %s: already running", name)
	}
	c.Net.setDown(name, false)
	if err := c.start(name); err != nil {
		c.Net.setDown(name, true) // as before: it is not running
		return err
	}
	return nil
}

// Close shuts every running node down.
func (c *Cluster) Close() {
	for _, name := range c.names {
		c.mu.Lock()
		n := c.nodes[name]
		c.nodes[name] = nil
		c.mu.Unlock()
		if n != nil {
			n.Shutdown(context.Background())
		}
	}
}

// Violations lists every (repo, epoch) that saw commits from two nodes.
func (c *Cluster) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.dup)
}

func (c *Cluster) recordCommit(repoName string, epoch uint64, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := epochKey{repoName, epoch}
	if prev, ok := c.writers[k]; ok && prev != node {
		c.dup = append(c.dup, fmt.Sprintf("%s epoch %d: %s and %s", repoName, epoch, prev, node))
		return
	}
	c.writers[k] = node
}

// warm records that node served repoName and counts a cache hit when its
// modelled pack cache already held the repository.
func (c *Cluster) warm(node, repoName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	set := c.cache[node]
	if set == nil {
		set = map[string]bool{}
		c.cache[node] = set
	}
	c.accesses++
	if set[repoName] {
		c.cacheHits++
	}
	set[repoName] = true
}

// CacheStats counts the requests served so far and how many of them found
// the repository in the serving node's modelled pack cache.
func (c *Cluster) CacheStats() (hits, accesses int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cacheHits, c.accesses
}

// Cached reports whether node's modelled pack cache holds repoName: the
// node served it at some point, restarts included (a persistent volume).
func (c *Cluster) Cached(node, repoName string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cache[node][repoName]
}

// Serve runs op for repoName the way a front end would, entering at node
// entry: Route; serve locally, or forward to the owner, which routes again
// (at most MaxHops hops). A connect failure goes through ConnectFailed
// and is retried where it says, at most twice per hop (the second failure
// is the one that may force the repository over). A request forwarded to
// a node that answers moved (a draining node whose lease ended while the
// forwarder's view still named it) goes back to the forwarder, which
// follows it with Moved, at most maxMoves times. Both happen before any of
// the request is sent, so pushes follow them as reads do. It returns op's
// result and the node that served.
func (c *Cluster) Serve(ctx context.Context, entry, repoName, method string, op func(n *actors.Node, node string) (string, error)) (string, string, error) {
	key, err := names.Parse(repoName)
	if err != nil {
		return "", entry, err
	}
	at, from := entry, ""
	moves := 0
	for hop := 0; ; hop++ {
		n := c.Node(at)
		if n == nil {
			return "", at, fmt.Errorf("%s: %w", at, ErrNodeDown)
		}
		r, err := n.Route(ctx, key)
		var moved *actors.MovedError
		if errors.As(err, &moved) && from != "" && moves < maxMoves {
			moves++
			released := at
			at, hop = from, hop-1
			if n = c.Node(at); n == nil {
				return "", at, fmt.Errorf("%s: %w", at, ErrNodeDown)
			}
			r, err = n.Moved(ctx, key, released)
		}
		for fails := 0; err == nil && !r.Local; fails++ {
			cerr := c.Net.Connect(ctx, at, r.Node)
			if cerr == nil {
				if fails > 0 {
					n.ConnectSucceeded(key, r.Node)
				}
				break
			}
			if fails == 2 {
				err = cerr
				break
			}
			r, err = n.ConnectFailed(ctx, key, r.Node, method)
		}
		if err != nil {
			return "", at, err
		}
		if r.Local {
			c.warm(at, repoName)
			out, err := op(n, at)
			return out, at, err
		}
		if hop == MaxHops {
			return "", at, fmt.Errorf("%s via %s: %w", repoName, at, ErrHopLimit)
		}
		from, at = at, r.Node
	}
}

// maxMoves matches transport/service/gitserve: how often one request follows a
// moved answer.
const maxMoves = 2

// RefID is the object ID the harness writes for value v.
func RefID(v uint64) object.ID {
	var id object.ID
	binary.BigEndian.PutUint64(id[:8], v)
	id[len(id)-1] = 1 // never the zero ID
	return id
}

// RefValue inverts RefID.
func RefValue(id object.ID) uint64 { return binary.BigEndian.Uint64(id[:8]) }

// Push sets ref of repoName to RefID(v) through entry (creating it when
// absent) and records the lease epoch it committed under. It returns the
// node that committed.
func (c *Cluster) Push(ctx context.Context, entry, repoName, ref string, v uint64) (string, uint64, error) {
	r, err := c.update(ctx, entry, repoName, ref, nil, v)
	return r.Node, r.Epoch, err
}

// CASResult is how a compare-and-swap push ended.
type CASResult struct {
	Node  string // the node that served it
	Epoch uint64 // the lease epoch it ran under
	// Sent: the update reached the repository's actor, so a failed one may
	// still have been applied (or be applied later). Unsent, nothing was
	// written.
	Sent bool
	// Stale: refused because the ref was not at the old value; nothing was
	// written.
	Stale bool
}

// CAS sets ref of repoName to RefID(v) through entry if it is at
// RefID(old), or absent for old 0 (a push with its old value), and
// records the lease epoch it committed under.
func (c *Cluster) CAS(ctx context.Context, entry, repoName, ref string, old, v uint64) (CASResult, error) {
	return c.update(ctx, entry, repoName, ref, &old, v)
}

// update pushes ref=RefID(v) with the old value *old (nil: whatever the
// ref holds now).
func (c *Cluster) update(ctx context.Context, entry, repoName, ref string, old *uint64, v uint64) (CASResult, error) {
	var r CASResult
	_, node, err := c.Serve(ctx, entry, repoName, "POST", func(n *actors.Node, node string) (string, error) {
		key, err := names.Parse(repoName)
		if err != nil {
			return "", err
		}
		s, err := n.Session(ctx, key)
		if err != nil {
			return "", err
		}
		defer s.Release()
		r.Epoch = s.Epoch
		cur, _ := s.Snapshot.Ref(ref)
		if old != nil {
			cur = object.ID{}
			if *old != 0 {
				cur = RefID(*old)
			}
		}
		r.Sent = true
		res, err := s.UpdateRefs(ctx, nil, []repo.RefUpdate{{Name: ref, Old: cur, New: RefID(v)}}, true)
		if err != nil {
			return "", err
		}
		if e := res[0]; e != nil {
			r.Stale = errors.Is(e, repo.ErrStale)
			return "", e
		}
		c.recordCommit(repoName, s.Epoch, node)
		return "", nil
	})
	r.Node = node
	return r, err
}

// Get reads ref of repoName through entry (a GET: it may move a repository
// away from an unreachable owner). ok is false when the ref is absent.
func (c *Cluster) Get(ctx context.Context, entry, repoName, ref string) (node string, v uint64, ok bool, err error) {
	_, node, err = c.Serve(ctx, entry, repoName, "GET", func(n *actors.Node, _ string) (string, error) {
		key, err := names.Parse(repoName)
		if err != nil {
			return "", err
		}
		s, err := n.Session(ctx, key)
		if err != nil {
			return "", err
		}
		defer s.Release()
		var id object.ID
		id, ok = s.Snapshot.Ref(ref)
		v = RefValue(id)
		return "", nil
	})
	return node, v, ok, err
}

// Refs reads repoName's refs straight from the store, read-only (it fences
// nobody): what is durable, whoever serves the repository.
func (c *Cluster) Refs(ctx context.Context, repoName string) (map[string]uint64, error) {
	f, err := refdb.OpenFollower(ctx, c.Store, "repo/"+repoName, refdb.Options{})
	if err != nil {
		return nil, fmt.Errorf("read refs of %s: %w", repoName, err)
	}
	defer f.Close()
	out := map[string]uint64{}
	for k, val := range f.View().Scan("ref/") {
		id, err := object.ParseID(string(val))
		if err != nil {
			return nil, fmt.Errorf("read refs of %s: %s: %w", repoName, k, err)
		}
		out[strings.TrimPrefix(k, "ref/")] = RefValue(id)
	}
	return out, nil
}

// Entry reads repoName's ownership entry as node sees it.
func (c *Cluster) Entry(node, repoName string) (rc.Entry, bool) {
	n := c.Node(node)
	r, err := names.Parse(repoName)
	if n == nil || err != nil {
		return rc.Entry{}, false
	}
	return n.OwnershipView().Get(r)
}

// Network is the simulated peer network. A killed node is unreachable; a
// partitioned node reaches no other node and no node reaches it (it still
// reaches the object store, as in a real split where S3 stays up).
type Network struct {
	mu       sync.Mutex
	down     map[string]bool
	cut      map[string]bool
	drops    map[[2]string]int
	attempts map[[2]string]int
	delay    time.Duration
}

func newNetwork() *Network {
	return &Network{down: map[string]bool{}, cut: map[string]bool{}, drops: map[[2]string]int{}, attempts: map[[2]string]int{}}
}

// Attempts counts the connects from → to so far, failed ones included
// (forwards and calls to the leader alike).
func (nw *Network) Attempts(from, to string) int {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.attempts[[2]string{from, to}]
}

func (nw *Network) setDown(node string, down bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.down[node] = down
}

// Partition isolates node (on) or heals it (off).
func (nw *Network) Partition(node string, on bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.cut[node] = on
}

// HealAll ends every partition.
func (nw *Network) HealAll() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	clear(nw.cut)
}

// Drop makes the next count connects from → to fail.
func (nw *Network) Drop(from, to string, count int) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.drops[[2]string{from, to}] += count
}

// SetDelay sets the latency of every connect.
func (nw *Network) SetDelay(d time.Duration) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.delay = d
}

// Connect simulates opening a connection from → to.
func (nw *Network) Connect(ctx context.Context, from, to string) error {
	nw.mu.Lock()
	delay := nw.delay
	var err error
	k := [2]string{from, to}
	nw.attempts[k]++
	switch {
	case from == to:
	case nw.down[from] || nw.down[to] || nw.cut[from] || nw.cut[to]:
		err = fmt.Errorf("%s → %s: %w", from, to, ErrConnect)
	case nw.drops[k] > 0:
		nw.drops[k]--
		err = fmt.Errorf("%s → %s (dropped): %w", from, to, ErrConnect)
	}
	nw.mu.Unlock()
	if delay > 0 && from != to {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// peerClient is a follower's cluster.LeaderService over the simulated
// network: the leader node's LeaderService, reached through Connect.
type peerClient struct {
	c    *Cluster
	from string
}

func (p *peerClient) leader(ctx context.Context) (rc.LeaderService, error) {
	to := p.c.Leader()
	if err := p.c.Net.Connect(ctx, p.from, to); err != nil {
		return nil, fmt.Errorf("%w: %w", actors.ErrLeaderUnreachable, err)
	}
	n := p.c.Node(to)
	if n == nil || n.LeaderService() == nil {
		return nil, fmt.Errorf("%w: %s not serving", actors.ErrLeaderUnreachable, to)
	}
	return n.LeaderService(), nil
}

// viaPeer sends m to the leader over the simulated network.
func viaPeer[M, R any](ctx context.Context, p *peerClient, m M, send func(rc.LeaderService, context.Context, M) (R, error)) (R, error) {
	l, err := p.leader(ctx)
	if err != nil {
		var zero R
		return zero, err
	}
	return send(l, ctx, m)
}

func (p *peerClient) Claim(ctx context.Context, m rc.ClaimLease) (rc.Decision, error) {
	return viaPeer(ctx, p, m, rc.LeaderService.Claim)
}

func (p *peerClient) Renew(ctx context.Context, m rc.RenewLeases) (rc.LeasesRenewed, error) {
	if m.Session != 0 {
		p.c.mu.Lock()
		p.c.lastRenewal[p.from] = m
		p.c.mu.Unlock()
	}
	return viaPeer(ctx, p, m, rc.LeaderService.Renew)
}

// ReplayRenewal delivers node's last session renewal to the leader again,
// as a message delayed in the network would arrive: after the node
// restarted (a stale session, to be declined) or not (a duplicate). ok is
// false when there is nothing to replay or no leader running.
func (c *Cluster) ReplayRenewal(ctx context.Context, node string) (m rc.RenewLeases, r rc.LeasesRenewed, ok bool, err error) {
	c.mu.Lock()
	m, ok = c.lastRenewal[node]
	c.mu.Unlock()
	l := c.Node(c.Leader())
	if !ok || l == nil {
		return m, r, false, nil
	}
	r, err = l.LeaderService().Renew(ctx, m)
	return m, r, true, err
}

func (p *peerClient) Release(ctx context.Context, m rc.ReleaseLease) (rc.Decision, error) {
	return viaPeer(ctx, p, m, rc.LeaderService.Release)
}

func (p *peerClient) ForceGrant(ctx context.Context, m rc.ForceGrantLease) (rc.Decision, error) {
	return viaPeer(ctx, p, m, rc.LeaderService.ForceGrant)
}
