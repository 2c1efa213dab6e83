package peer

import (
	"errors"
	"fmt"

	"github.com/rgit/rgit/cluster"
)

// ErrUnknownNode: the directory has no address for a node.
var ErrUnknownNode = errors.New("peer: unknown node")

// Directory maps node names to their peer ports: the peer HTTP port
// (RGIT_PEER_ADDR) and the peer stream port (its port + 1). It is
// immutable and safe for concurrent use.
type Directory struct {
	svc      string            // headless service; "" for a static map
	httpPort int               // port of every node's peer HTTP listener (service mode)
	static   map[string]string // node → peer HTTP host:port (static mode)
}

// ServiceDirectory finds node N at "{N}.{svc}" (a Kubernetes headless
// service), every node listening on the same peer HTTP port.
func ServiceDirectory(svc string, httpPort int) (*Directory, error) {
	if svc == "" {
		return nil, errors.New("peer: empty service name")
	}
	if httpPort <= 0 || httpPort >= 65535 {
		return nil, fmt.Errorf("peer: peer HTTP port %d out of range", httpPort)
	}
	return &Directory{svc: svc, httpPort: httpPort}, nil
}

// StaticDirectory uses a fixed node → peer HTTP address map, as parsed by
// cluster.ParsePeerMap from RGIT_PEERS.
func StaticDirectory(peers map[string]string) (*Directory, error) {
	if len(peers) == 0 {
		return nil, errors.New("peer: empty peer map")
	}
	m := make(map[string]string, len(peers))
	for n, a := range peers {
		if _, err := cluster.StreamAddr(a); err != nil {
			return nil, fmt.Errorf("peer: node %s: %w", n, err)
		}
		m[n] = a
	}
	return &Directory{static: m}, nil
}

// HTTPAddr is node's peer HTTP address (forwarded smart-HTTP requests).
func (d *Directory) HTTPAddr(node string) (string, error) {
	if d.static != nil {
		a, ok := d.static[node]
		if !ok {
			return "", fmt.Errorf("%w: %q", ErrUnknownNode, node)
		}
		return a, nil
	}
	if node == "" {
		return "", fmt.Errorf("%w: empty name", ErrUnknownNode)
	}
	return cluster.PeerAddr(node, d.svc, d.httpPort), nil
}

// StreamAddr is node's peer stream address (leader calls, git sessions,
// admin): the peer HTTP port + 1.
func (d *Directory) StreamAddr(node string) (string, error) {
	a, err := d.HTTPAddr(node)
	if err != nil {
		return "", err
	}
	return cluster.StreamAddr(a)
}

// Nodes lists the nodes of a static map, sorted; nil in service mode,
// where membership is whatever the service resolves.
func (d *Directory) Nodes() []string {
	if d.static == nil {
		return nil
	}
	return cluster.SortedNodes(d.static)
}
