package cluster

import (
	"math"

	"github.com/rgit/rgit/storage/names"
)

// NodeWeight is a placement candidate. Higher weights win proportionally
// more repos; a weight that is not a positive finite number excludes the
// node.
type NodeWeight struct {
	Node   string
	Weight float64
}

// LiveSet is the set of nodes the leader currently considers live, with
// their placement weights.
type LiveSet []NodeWeight

// Has reports whether node is in the set with a usable weight.
func (l LiveSet) Has(node string) bool {
	for _, nw := range l {
		if nw.Node == node && usableWeight(nw.Weight) {
			return true
		}
	}
	return false
}

// Rendezvous picks the node that weighted rendezvous hashing (seed 003)
// assigns repo to, or "" when no node is usable. Each node scores
// -w/ln(u) with u a hash of (node, repo) mapped into (0,1); the highest
// score wins, ties broken by the smaller name. The result depends only on
// the inputs, so every node computes the same answer; adding a node moves
// only the repos it wins (≈ its share), removing one moves only its repos.
func Rendezvous(repo names.Repo, nodes []NodeWeight) string {
	best, bestScore := "", math.Inf(-1)
	for _, nw := range nodes {
		if !usableWeight(nw.Weight) || nw.Node == "" {
			continue
		}
		s := rendezvousScore(repo, nw)
		if s > bestScore || s == bestScore && nw.Node < best {
			best, bestScore = nw.Node, s
		}
	}
	return best
}

func usableWeight(w float64) bool { return w > 0 && !math.IsInf(w, 1) && !math.IsNaN(w) }

func rendezvousScore(repo names.Repo, nw NodeWeight) float64 {
	h := hashPair(nw.Node, repo)
	// 53 high bits, offset by half a step: u is strictly inside (0,1), so
	// ln(u) is finite and negative.
	u := (float64(h>>11) + 0.5) / (1 << 53)
	return -nw.Weight / math.Log(u)
}

// hashPair is FNV-1a over node, a separator and repo ("owner/name"),
// finished with the splitmix64 mixer for avalanche (plain FNV-1a clusters
// on similar names like rgit-1/rgit-2). Fixed forever: changing it
// reshuffles placement. It hashes repo's parts in place: a scan of the
// map hashes every repository against every node.
func hashPair(node string, repo names.Repo) uint64 {
	h := fnv1a(offset64, node)
	h *= prime64 // a zero separator byte between node and repo
	h = fnv1a(h, repo.Owner())
	h = (h ^ '/') * prime64
	h = fnv1a(h, repo.Name())
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
)

// fnv1a continues the FNV-1a hash h over s.
func fnv1a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * prime64
	}
	return h
}
