package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
)

// PeerAddrs finds a node's peer stream port (transport/peer.Directory).
type PeerAddrs interface {
	StreamAddr(node string) (string, error)
}

// headerHop counts how often an admin request was relayed (the peer
// protocol's hop header; a relayed request is relayed at most once more).
const (
	headerHop = "X-Rgit-Hop"
	maxHops   = 2
)

// routed lists the commands that act on a repository through its owner,
// with the index of that repository's argument. The others (create-repo,
// credentials, listings) act on the store or on this node and run here.
var routed = map[string]int{
	"delete-repo": 0, "fork": 0, "repack": 0, "gc": 0, "set-visibility": 0, "set-head": 0,
	"grant": 0, "revoke": 0, "list-access": 0, "protect": 0, "unprotect": 0,
}

// relay delivers req to the node that owns its repository when that is
// not this one (cluster mode: s.Peers set) and reports whether it did;
// the owner's event stream is copied to w as it arrives.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, req Request) bool {
	i, ok := routed[req.Command]
	pos, _, err := parseFlags(req.Args, flagSpecs[req.Command])
	if s.Peers == nil || !ok || err != nil || len(pos) <= i {
		return false
	}
	owner, name, err := s.existing(r.Context(), pos[i])
	if err != nil {
		return false // run answers the usage or not-found error
	}
	route, err := s.Node.Route(r.Context(), owner, name)
	if err != nil {
		s.failRelay(w, req, fmt.Errorf("route %s/%s: %w", owner, name, err))
		return true
	}
	if route.Local {
		return false
	}
	hop, _ := strconv.Atoi(r.Header.Get(headerHop))
	if hop+1 > maxHops {
		s.failRelay(w, req, fmt.Errorf("%s/%s: %w (nodes disagree on the owner; retry)", owner, name, errHopLimit))
		return true
	}
	// The owner forgets its index cache entry when it changes the
	// repository; so does the node the operator talked to. Other nodes see
	// a repository go public within the cache TTL (going private takes
	// effect at once: the owner re-checks every session).
	defer s.Deps.Meta.Forget(owner, name)
	if err := s.relayTo(r.Context(), w, route.Node, hop+1, req); err != nil {
		s.failRelay(w, req, err)
	}
	return true
}

var errHopLimit = errors.New("relay hop limit reached")

var errRelayStarted = errors.New("relay failed after the owner started answering")

// relayTo sends req to node and streams its answer to w.
func (s *Server) relayTo(ctx context.Context, w http.ResponseWriter, node string, hop int, req Request) error {
	addr, err := s.Peers.StreamAddr(node)
	if err != nil {
		return fmt.Errorf("owner %s: %w", node, err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hc, scheme := streamClient(s.PeerTLS)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+addr+Path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("owner %s at %s: %w", node, addr, err)
	}
	hr.Header.Set("Authorization", "Bearer "+s.Secret)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(headerHop, strconv.Itoa(hop))
	resp, err := hc.Do(hr)
	if err != nil {
		return fmt.Errorf("reach owner %s at %s: %w: %w", node, addr, actors.ErrOwnerUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("owner %s: %s: %s", node, resp.Status, bytes.TrimSpace(msg))
	}
	s.Log.Info("admin command relayed to the owner", zap.String("command", req.Command), zap.String("node", node))
	w.Header().Set("Content-Type", "application/x-ndjson")
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return fmt.Errorf("%w: %w", errRelayStarted, err)
			}
			_ = rc.Flush()
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("%w: %w", errRelayStarted, rerr)
		}
	}
}

// failRelay reports a relay failure as the command's error event, unless
// the owner's answer had started (then the client sees a truncated
// stream and reports that).
func (s *Server) failRelay(w http.ResponseWriter, req Request, err error) {
	s.Log.Warn("admin command not delivered to the owner", zap.String("command", req.Command), zap.Error(err))
	if errors.Is(err, errRelayStarted) {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	(&eventWriter{w: w, rc: http.NewResponseController(w)}).send(Event{Error: err.Error(), Code: codeOf(err), Done: true})
}
