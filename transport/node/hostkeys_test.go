package node

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rgit/rgit/cluster"
)

// leaderAnswer is a leader that answers every renewal with its host key.
type leaderAnswer struct {
	cluster.LeaderService
	hostKey string
	heard   []string
}

func (l *leaderAnswer) Renew(_ context.Context, m cluster.RenewLeases) (cluster.LeasesRenewed, error) {
	l.heard = append(l.heard, m.HostKey)
	return cluster.LeasesRenewed{HostKey: l.hostKey}, nil
}

// TestFleetHostKeys: the heartbeat carries each node's SSH host key
// fingerprint both ways, and a node whose peer presents another key warns
// once per peer and key; nodes that agree say nothing.
func TestFleetHostKeys(t *testing.T) {
	const warning = "a peer presents a different SSH host key: clients reaching the fleet by one name will see REMOTE HOST IDENTIFICATION HAS CHANGED; give every node the same RGIT_HOST_KEY"
	ctx := context.Background()
	core, logs := observer.New(zap.InfoLevel)
	keys := newFleetHostKeys(zap.New(core))
	leader := &leaderAnswer{hostKey: "SHA256:leader"}
	follower := followerHostKeys{LeaderService: leader, keys: keys, leader: "rgit-0"}

	// Before its SSH server has a key, a node compares nothing.
	follower.Renew(ctx, cluster.RenewLeases{Node: "rgit-1"})
	keys.setOwn("SHA256:mine")
	for range 3 {
		follower.Renew(ctx, cluster.RenewLeases{Node: "rgit-1"})
	}
	if got := leader.heard; len(got) != 4 || got[0] != "" || got[3] != "SHA256:mine" {
		t.Errorf("the leader heard %q", got)
	}
	warned := logs.FilterMessage(warning).All()
	if len(warned) != 1 || warned[0].ContextMap()["peer"] != "rgit-0" || warned[0].ContextMap()["peer_fingerprint"] != "SHA256:leader" {
		t.Fatalf("warnings %v, want one naming rgit-0 and its key", warned)
	}

	// The leader's side: it answers with its key and hears each follower.
	core, logs = observer.New(zap.InfoLevel)
	lkeys := newFleetHostKeys(zap.New(core))
	lkeys.setOwn("SHA256:leader")
	svc := leaderHostKeys{LeaderService: &leaderAnswer{}, keys: lkeys}
	r, _ := svc.Renew(ctx, cluster.RenewLeases{Node: "rgit-1", HostKey: "SHA256:leader"})
	if r.HostKey != "SHA256:leader" {
		t.Errorf("the leader answered host key %q", r.HostKey)
	}
	svc.Renew(ctx, cluster.RenewLeases{Node: "rgit-2", HostKey: "SHA256:other"})
	svc.Renew(ctx, cluster.RenewLeases{Node: "rgit-2", HostKey: "SHA256:other"})
	svc.Renew(ctx, cluster.RenewLeases{Node: "rgit-2", HostKey: "SHA256:third"})
	warned = logs.FilterMessage(warning).All()
	if len(warned) != 2 || warned[0].ContextMap()["peer"] != "rgit-2" || warned[1].ContextMap()["peer_fingerprint"] != "SHA256:third" {
		t.Fatalf("warnings %v, want one for each new key of rgit-2 and none for rgit-1", warned)
	}
}
