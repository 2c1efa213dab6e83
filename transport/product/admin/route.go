package admin

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/transport/frontend/peer"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// PeerAddrs finds a node's peer stream port (transport/frontend/peer.Directory).
type PeerAddrs interface {
	StreamAddr(node string) (string, error)
}

// relay passes m to the node that owns its repository when that is not
// this one (cluster mode: s.Peers set) and reports whether it did; the
// owner's progress lines reach progress as they arrive and its reply is
// decoded into out (a pointer to m's reply type). It is the same message
// with the next hop, so a relayed message is relayed at most once more
// (gitserve.MaxHops).
func (s *Server) relay(ctx context.Context, m Msg, out any, progress func(string)) (bool, error) {
	t, ok := m.(routed)
	if s.Peers == nil || !ok {
		return false, nil
	}
	rp, err := s.existing(ctx, t.target())
	if err != nil {
		return false, nil // the handler answers the usage or not-found error
	}
	route, err := s.Node.Route(ctx, rp)
	if err != nil {
		return true, s.relayFailed(m, fmt.Errorf("route %s: %w", rp, err))
	}
	if route.Local {
		return false, nil
	}
	// The owner forgets its index cache entry when it changes the
	// repository; so does the node the operator talked to. Other nodes see
	// a repository go public within the cache TTL (going private takes
	// effect at once: the owner re-checks every session).
	defer s.Deps.Meta.Forget(rp)
	return true, s.toOwner(ctx, route.Node, rp.String(), m, out, progress)
}

// toOwner sends m to node, the owner of repository r, with the next hop
// after ctx's, decoding its reply into out. The owner's classified
// failure comes back unchanged; any other is classified here.
func (s *Server) toOwner(ctx context.Context, node, r string, m Msg, out any, progress func(string)) error {
	hop, err := gitserve.NextHop(ctx)
	if err != nil {
		return s.relayFailed(m, fmt.Errorf("%s: %w (nodes disagree on the owner; retry)", r, errHopLimit))
	}
	addr, err := s.Peers.StreamAddr(node)
	if err != nil {
		return s.relayFailed(m, fmt.Errorf("owner %s: %w", node, err))
	}
	hc, scheme := streamClient(s.PeerTLS)
	err = peer.SendProgress(ctx, hc, scheme+"://"+addr, s.Secret, hop, m, out, progress)
	var (
		coded   *peer.CodedError
		refused *peer.RefusedError
	)
	command, _ := m.op()
	switch {
	case err == nil:
		s.Log.Info("admin command relayed to the owner", zap.String("command", command), zap.String("node", node))
		return nil
	case errors.As(err, &coded):
		return err // the owner's own answer
	case errors.As(err, &refused):
		return s.relayFailed(m, fmt.Errorf("owner %s: %w", node, err))
	}
	return s.relayFailed(m, fmt.Errorf("reach owner %s at %s: %w: %w", node, addr, actors.ErrOwnerUnreachable, err))
}

var errHopLimit = errors.New("relay hop limit reached")

// relayFailed logs and classifies a failure to deliver m to its owner.
func (s *Server) relayFailed(m Msg, err error) error {
	command, _ := m.op()
	s.Log.Warn("admin command not delivered to the owner", zap.String("command", command), zap.Error(err))
	return &peer.CodedError{Code: codeOf(err), Msg: err.Error()}
}
