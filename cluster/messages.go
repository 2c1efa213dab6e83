package cluster

import (
	"context"

	"github.com/rgit/rgit/storage/names"
)

// The leader's messages. The same Go values are sent to the leader actor
// in process and, wrapped in one peer envelope, over the peer stream port
// (transport/frontend/peer), so that a node's request to the leader is one type
// wherever the leader runs. Replies: a Decision for ClaimLease, ReleaseLease
// and ForceGrantLease; LeasesRenewed for RenewLeases.
type (
	// ClaimLease asks for Repo's lease for Node.
	ClaimLease struct {
		Repo names.Repo `json:"repo"`
		Node string     `json:"node"`
	}
	// RenewLeases is a node's heartbeat: with Open it starts a new session
	// for Node (a node starting; Map.OpenSession), with Session it renews
	// that session and so every entry bound to it (Map.RenewSession), and
	// it renews the per-repository leases of Repos (Map.Renew) — a node
	// with a session lists only the repos whose drain it must undo. Its
	// cost is one small write, whatever the node holds.
	//
	// HostKey, on this message and its answer, is the SSH host key
	// fingerprint of the sender: nodes that would present different keys
	// behind one name warn (transport/node). The leader's decisions ignore it.
	//
	// Leaving: the node is draining (SIGTERM). The leader takes it out of
	// placement at once, so that neither steering nor the rebalancer
	// sends it a repository, even if it holds none to release.
	RenewLeases struct {
		Node    string       `json:"node"`
		Session uint64       `json:"session,omitempty"`
		Open    bool         `json:"open,omitempty"`
		Repos   []names.Repo `json:"repos,omitempty"`
		HostKey string       `json:"host_key,omitempty"`
		Leaving bool         `json:"leaving,omitempty"`
	}
	// LeasesRenewed answers RenewLeases: every repository of the batch is
	// in one list. Session is the node's session after the call (the new
	// one after Open); SessionDeclined: the renewed session is not the
	// node's current one (a replaced incarnation), so every entry the
	// node holds under it is lost and Repos are all declined. The
	// leader's moves (Rebalancer) ride on the answer: Prewarm lists
	// repositories about to move to the node, which fetches their packs
	// into its cache; Release lists repositories it moves elsewhere, and
	// the node releases each it holds, through the drain, as it would an
	// idle one. An older node ignores both and keeps what it holds.
	LeasesRenewed struct {
		Renewed         []names.Repo `json:"renewed"`
		Declined        []names.Repo `json:"declined"`
		Session         uint64       `json:"session,omitempty"`
		SessionDeclined bool         `json:"session_declined,omitempty"`
		Prewarm         []names.Repo `json:"prewarm,omitempty"`
		Release         []names.Repo `json:"release,omitempty"`
		HostKey         string       `json:"host_key,omitempty"`
	}
	// ReleaseLease shortens Node's lease on Repo to the drain.
	ReleaseLease struct {
		Node string     `json:"node"`
		Repo names.Repo `json:"repo"`
	}
	// ForceGrantLease asks to move Repo from Dead, which a request could not
	// reach, to Requester.
	ForceGrantLease struct {
		Repo      names.Repo `json:"repo"`
		Requester string     `json:"requester"`
		Dead      string     `json:"dead"`
	}
)

// LeaderService answers the leader's messages: the leader actor on the
// leader node, the peer client everywhere else.
type LeaderService interface {
	Claim(ctx context.Context, m ClaimLease) (Decision, error)
	Renew(ctx context.Context, m RenewLeases) (LeasesRenewed, error)
	Release(ctx context.Context, m ReleaseLease) (Decision, error)
	ForceGrant(ctx context.Context, m ForceGrantLease) (Decision, error)
}
