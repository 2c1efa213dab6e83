package node

import (
	"fmt"
	"net"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/transport/frontend/peer"
	"github.com/rgit/rgit/transport/node/config"
)

// clusterSetup is cluster mode's wiring: where peers are, how this node
// reaches the leader, and the forwarders the front ends use. nil in
// single-node mode.
type clusterSetup struct {
	dir      *peer.Directory
	leader   *peer.LeaderClient // nil on the leader node
	httpFwd  *peer.HTTPForwarder
	sessions *peer.SessionClient
	hostKeys *fleetHostKeys
}

// newClusterSetup reads RGIT_PEER_SVC or RGIT_PEERS and RGIT_SELF (config
// has validated them) and returns the setup with the actors' cluster
// config.
func newClusterSetup(cfg *config.Config, secret string, log *zap.Logger) (*clusterSetup, *actors.ClusterConfig, error) {
	var dir *peer.Directory
	var err error
	if cfg.Peers != nil {
		dir, err = peer.StaticDirectory(cfg.Peers)
	} else {
		var port int
		if _, p, serr := net.SplitHostPort(cfg.PeerAddr); serr == nil {
			port, _ = strconv.Atoi(p)
		}
		dir, err = peer.ServiceDirectory(cfg.PeerSvc, port)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("RGIT_PEER_SVC/RGIT_PEERS: %w", err)
	}
	leaderName, err := cluster.LeaderOf(cfg.Self)
	if err != nil {
		return nil, nil, fmt.Errorf("RGIT_SELF: %w", err)
	}
	cs := &clusterSetup{dir: dir, httpFwd: peer.NewHTTPForwarder(dir, secret, log).WithTLS(cfg.PeerTLS),
		sessions: peer.NewSessionClient(dir, secret).WithTLS(cfg.PeerTLS), hostKeys: newFleetHostKeys(log)}
	cc := &actors.ClusterConfig{Self: cfg.Self, Timings: cluster.DefaultTimings()}
	cc.Timings.LeaderWait, cc.Timings.StoreGrace = cfg.LeaderWait, cfg.StoreGrace
	if cfg.Rebalance {
		cc.Rebalance = cfg.RebalanceMoves
	}
	if leaderName != cfg.Self {
		addr, err := dir.StreamAddr(leaderName)
		if err != nil {
			return nil, nil, fmt.Errorf("leader %s: %w", leaderName, err)
		}
		cs.leader = peer.NewLeaderClient(addr, secret, actors.ErrLeaderUnreachable).WithTLS(cfg.PeerTLS)
		cc.Leader = followerHostKeys{LeaderService: cs.leader, keys: cs.hostKeys, leader: leaderName}
	}
	return cs, cc, nil
}

// mountPeer adds the peer stream port's cluster endpoints: the leader
// calls (answered on the leader node) to msgs, the envelope router already
// mounted on mux, and forwarded git sessions to mux.
func (cs *clusterSetup) mountPeer(mux *http.ServeMux, msgs *peer.Handlers, secret string, node *actors.Node, sessions *peer.SessionHandler, log *zap.Logger) {
	peer.HandleLeader(msgs, func() cluster.LeaderService { // nil off the leader: answered 503
		if l := node.LeaderService(); l != nil {
			return leaderHostKeys{LeaderService: l, keys: cs.hostKeys}
		}
		return nil
	})
	mux.Handle(peer.PathGit, peer.RequireBearer(secret, log, sessions))
}

func (cs *clusterSetup) close() {
	if cs == nil {
		return
	}
	cs.httpFwd.Close()
	if cs.leader != nil {
		cs.leader.Close()
	}
}
