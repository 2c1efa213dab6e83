package node

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cluster"
)

// fleetHostKeys compares the SSH host key a node presents with its
// peers', exchanged in the heartbeat (cluster.RenewLeases and its answer):
// every node follows the leader, so the leader hears every node and every
// node hears the leader. A fleet behind one name must present one host
// key (one RGIT_HOST_KEY), or a client gets "REMOTE HOST IDENTIFICATION
// HAS CHANGED" whenever the balancer picks another node; a node that sees
// another key logs a warning, once per peer and key.
type fleetHostKeys struct {
	log  *zap.Logger
	mu   sync.Mutex
	own  string            // this node's fingerprint; "" until its SSH server has its key
	seen map[string]string // peer → the fingerprint last compared
}

func newFleetHostKeys(log *zap.Logger) *fleetHostKeys {
	return &fleetHostKeys{log: log, seen: map[string]string{}}
}

// setOwn records this node's fingerprint.
func (k *fleetHostKeys) setOwn(fp string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.own = fp
}

func (k *fleetHostKeys) ownKey() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.own
}

// observe compares peer's fingerprint with this node's.
func (k *fleetHostKeys) observe(peer, fp string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if fp == "" || k.own == "" || k.seen[peer] == fp {
		return // not known on one side yet, or compared already
	}
	k.seen[peer] = fp
	if fp != k.own {
		k.log.Warn("a peer presents a different SSH host key: clients reaching the fleet by one name will see REMOTE HOST IDENTIFICATION HAS CHANGED; give every node the same RGIT_HOST_KEY",
			zap.String("peer", peer), zap.String("peer_fingerprint", fp), zap.String("fingerprint", k.own))
	}
}

// followerHostKeys is a follower's way to the leader: its heartbeat
// carries the node's host key and hears the leader's.
type followerHostKeys struct {
	cluster.LeaderService
	keys   *fleetHostKeys
	leader string
}

func (f followerHostKeys) Renew(ctx context.Context, m cluster.RenewLeases) (cluster.LeasesRenewed, error) {
	m.HostKey = f.keys.ownKey()
	r, err := f.LeaderService.Renew(ctx, m)
	if err == nil {
		f.keys.observe(f.leader, r.HostKey)
	}
	return r, err
}

// leaderHostKeys is the leader's service as peers reach it: it hears each
// follower's host key and answers with its own.
type leaderHostKeys struct {
	cluster.LeaderService
	keys *fleetHostKeys
}

func (l leaderHostKeys) Renew(ctx context.Context, m cluster.RenewLeases) (cluster.LeasesRenewed, error) {
	l.keys.observe(m.Node, m.HostKey)
	r, err := l.LeaderService.Renew(ctx, m)
	if err == nil {
		r.HostKey = l.keys.ownKey()
	}
	return r, err
}
