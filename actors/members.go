package actors

import (
	"sort"
	"time"

	"github.com/rgit/rgit/cluster"
)

// Member is a node with a session in the ownership map: one that has
// sent the leader a heartbeat since the map's sessions were last pruned.
type Member struct {
	Node string `json:"node"`
	// Live: its session has not expired, so the node is up and reaches
	// the leader.
	Live bool `json:"live"`
	// Renewed is the leader's record of its last heartbeat.
	Renewed time.Time `json:"renewed"`
}

// Members lists the nodes with a session in this node's view of the
// ownership map at now, sorted by name; none in single-node mode or
// before the node has a view.
func (n *Node) Members(now time.Time) []Member {
	v, ok := n.OwnershipView().(refView)
	if !ok || v.v == nil {
		return nil
	}
	var out []Member
	for k, b := range v.v.Scan(cluster.SessionPrefix) {
		node, err := cluster.NodeOfSessionKey(k)
		if err != nil {
			continue
		}
		var s cluster.NodeSession
		if s.UnmarshalBinary(b) != nil {
			continue
		}
		out = append(out, Member{Node: node, Live: now.Before(s.Expires), Renewed: s.Renewed})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}
