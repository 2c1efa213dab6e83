package cluster

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalidName: a node name, repo name or peer map is malformed.
var ErrInvalidName = errors.New("cluster: invalid name")

// splitOrdinal splits "rgit-3" into ("rgit", 3). The ordinal is a plain
// decimal without sign or leading zeros, as a StatefulSet writes it.
func splitOrdinal(node string) (string, uint64, error) {
	i := strings.LastIndexByte(node, '-')
	if i <= 0 || i == len(node)-1 {
		return "", 0, fmt.Errorf("node %q has no -ordinal suffix: %w", node, ErrInvalidName)
	}
	prefix, ord := node[:i], node[i+1:]
	if len(ord) > 1 && ord[0] == '0' {
		return "", 0, fmt.Errorf("node %q: ordinal has a leading zero: %w", node, ErrInvalidName)
	}
	for _, c := range ord {
		if c < '0' || c > '9' {
			return "", 0, fmt.Errorf("node %q: ordinal %q is not a number: %w", node, ord, ErrInvalidName)
		}
	}
	n, err := strconv.ParseUint(ord, 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("node %q: ordinal %q: %w", node, ord, ErrInvalidName)
	}
	if err := validNode(prefix); err != nil {
		return "", 0, err
	}
	return prefix, n, nil
}

// LeaderOf derives the leader's name from a node's own: the ordinal is
// replaced by 0 ("rgit-3" → "rgit-0"). Leadership is a name, not an
// election.
func LeaderOf(self string) (string, error) {
	prefix, _, err := splitOrdinal(self)
	if err != nil {
		return "", fmt.Errorf("leader of %q: %w", self, err)
	}
	return prefix + "-0", nil
}

// PeerAddr is the address of node's peer port through the headless
// service svc: "{node}.{svc}:{port}".
func PeerAddr(node, svc string, port int) string {
	return net.JoinHostPort(node+"."+svc, strconv.Itoa(port))
}

// StreamAddr is the peer stream address that goes with a peer HTTP
// address: the same host, the port plus one.
func StreamAddr(peerHTTP string) (string, error) {
	host, port, err := net.SplitHostPort(peerHTTP)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", peerHTTP, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n >= 65535 {
		return "", fmt.Errorf("address %q: port must be 1-65534", peerHTTP)
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1)), nil
}

// ParsePeerMap parses the static form of the peer list used without a
// headless service (development, tests): "rgit-0=127.0.0.1:9081,rgit-1=…".
// Every entry needs a valid node name and host:port; duplicates and empty
// entries are errors.
func ParsePeerMap(s string) (map[string]string, error) {
	out := make(map[string]string)
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("peer map is empty: %w", ErrInvalidName)
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		node, addr, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("peer map entry %q: want node=host:port: %w", part, ErrInvalidName)
		}
		node, addr = strings.TrimSpace(node), strings.TrimSpace(addr)
		if err := validNode(node); err != nil {
			return nil, fmt.Errorf("peer map entry %q: %w", part, err)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("peer map entry %q: bad address: %w", part, ErrInvalidName)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("peer map entry %q: bad port: %w", part, ErrInvalidName)
		}
		if _, dup := out[node]; dup {
			return nil, fmt.Errorf("peer map: node %q listed twice: %w", node, ErrInvalidName)
		}
		out[node] = addr
	}
	return out, nil
}

// SortedNodes returns the keys of a peer map in order, for deterministic
// iteration.
func SortedNodes(peers map[string]string) []string {
	out := make([]string, 0, len(peers))
	for n := range peers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// validNode accepts DNS-label-like node names: they become host names in
// PeerAddr and are stored in the map.
func validNode(node string) error {
	if node == "" || len(node) > 63 {
		return fmt.Errorf("node name %q: empty or longer than 63: %w", node, ErrInvalidName)
	}
	for i := 0; i < len(node); i++ {
		c := node[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c >= 'A' && c <= 'Z'
		if !ok {
			return fmt.Errorf("node name %q: character %q not allowed: %w", node, c, ErrInvalidName)
		}
	}
	if node[0] == '-' || node[len(node)-1] == '-' {
		return fmt.Errorf("node name %q: starts or ends with '-': %w", node, ErrInvalidName)
	}
	return nil
}
