package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/repo"
)

// Result is a message's reply: the value itself is what `rgit-admin
// --json` prints, so its JSON shape is a stable interface for scripts:
// fields are only ever added; Text is what a person reads.
type Result interface{ Text() string }

// Repos is list-repos' answer.
type Repos struct {
	Repos []string `json:"repos"`
}

func (r Repos) Text() string { return strings.Join(r.Repos, "\n") }

func (s *Server) listRepos(ctx context.Context, _ ListRepos) (Repos, error) {
	l, err := repo.List(ctx, s.Deps)
	if err != nil {
		return Repos{}, err
	}
	return Repos{Repos: nonNil(l)}, nil
}

// Status is status' answer: the node's build and its open repositories
// and, in a cluster, who it is, who leads, how fresh its view of the
// ownership map is, and the members that view names.
type Status struct {
	Version   string   `json:"version"`
	OpenRepos []string `json:"open_repos"`
	// Mode is "single-node" or "cluster"; the fields below are set in a
	// cluster only.
	Mode            string `json:"mode"`
	Node            string `json:"node,omitempty"`
	Leader          string `json:"leader,omitempty"`
	LeaderReachable bool   `json:"leader_reachable,omitempty"`
	// MapAgeMs is how old the node's view of the ownership map is (0 on
	// the leader, whose view is the map); -1: it has none (a single node
	// has no map).
	MapAgeMs int64 `json:"map_age_ms"`
	// Members are the nodes with a session in that view; Live ones
	// heartbeat the leader.
	Members []actors.Member `json:"members,omitempty"`
}

func (st Status) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version: %s\n", st.Version)
	if st.Mode == modeSingle {
		b.WriteString("node: single node (no cluster)\n")
	} else {
		role := "follower"
		if st.Node == st.Leader {
			role = "leader"
		}
		reach := "reachable"
		if !st.LeaderReachable {
			reach = "NOT reachable"
		}
		fmt.Fprintf(&b, "node: %s (%s; %s)\nleader: %s (%s)\n", st.Node, role, viewAge(st.MapAgeMs), st.Leader, reach)
		var live, gone []string
		for _, m := range st.Members {
			if m.Live {
				live = append(live, m.Node)
			} else {
				gone = append(gone, fmt.Sprintf("%s (last heartbeat %s)", m.Node, m.Renewed.UTC().Format(time.RFC3339)))
			}
		}
		fmt.Fprintf(&b, "live members (%d): %s\n", len(live), orNone(strings.Join(live, ", ")))
		if len(gone) > 0 {
			fmt.Fprintf(&b, "expired members: %s\n", strings.Join(gone, ", "))
		}
	}
	fmt.Fprintf(&b, "open repositories: %d", len(st.OpenRepos))
	for _, r := range st.OpenRepos {
		b.WriteString("\n" + r)
	}
	return b.String()
}

const (
	modeSingle  = "single-node"
	modeCluster = "cluster"
)

// viewAge describes a map view's age in milliseconds (-1: none).
func viewAge(ms int64) string {
	if ms < 0 {
		return "no view of the ownership map yet"
	}
	return fmt.Sprintf("ownership map view %d ms old", ms)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (s *Server) status(ctx context.Context, _ ShowStatus) (Status, error) {
	open, err := s.Node.OpenRepos(ctx)
	if err != nil {
		return Status{}, err
	}
	st := Status{Version: s.Version, OpenRepos: nonNil(open), Mode: modeSingle, MapAgeMs: -1}
	if s.Peers == nil {
		return st, nil
	}
	now := time.Now()
	st.Mode, st.Node, st.MapAgeMs = modeCluster, s.Self, mapAgeMs(s.Node, now)
	st.Leader, _ = cluster.LeaderOf(s.Self)
	st.LeaderReachable = s.Node.LeaderReachable(now)
	st.Members = s.Node.Members(now)
	return st, nil
}

// mapAgeMs is how old n's view of the ownership map is, in milliseconds;
// -1 when it has none.
func mapAgeMs(n *actors.Node, now time.Time) int64 {
	if age, ok := n.MapAge(now); ok {
		return age.Milliseconds()
	}
	return -1
}

// Where is where's answer: the repository's entry in one node's view of
// the ownership map. State is "live", "expired", "unowned" (no entry) or
// "single-node" (no map: this node serves everything); Node, Epoch and
// Expires are set for live and expired entries. Views are followed every
// 200 ms, so two nodes may answer differently just after a change: View
// names the node whose view this is and ViewAgeMs its age (0 on the
// leader, whose view is the map itself; -1: no view, as on a single node).
type Where struct {
	Repo      string     `json:"repo"`
	State     string     `json:"state"`
	Node      string     `json:"node,omitempty"`
	Epoch     uint64     `json:"epoch,omitempty"`
	Expires   *time.Time `json:"expires,omitempty"`
	View      string     `json:"view,omitempty"`
	ViewAgeMs int64      `json:"view_age_ms"`
}

func (w Where) Text() string {
	var s string
	switch w.State {
	case modeSingle:
		return w.Repo + " is served by this node (single node)"
	case "unowned":
		s = w.Repo + " is unowned (no node holds it; the next request claims it)"
	default:
		s = fmt.Sprintf("%s is owned by %s (epoch %d, lease %s, expires %s)", w.Repo, w.Node, w.Epoch, w.State, w.Expires.Format(time.RFC3339Nano))
	}
	if w.ViewAgeMs < 0 {
		return fmt.Sprintf("%s\n(%s has no view of the ownership map yet)", s, w.View)
	}
	return fmt.Sprintf("%s\naccording to %s's view of the ownership map, %d ms old", s, w.View, w.ViewAgeMs)
}

func (s *Server) where(ctx context.Context, m WhereIs) (Where, error) {
	rp, err := s.existing(ctx, m.Repo)
	if err != nil {
		return Where{}, err
	}
	if s.Peers == nil {
		return Where{Repo: rp.String(), State: modeSingle, ViewAgeMs: -1}, nil
	}
	now := time.Now()
	return whereIn(s.Node.OwnershipView(), s.Self, mapAgeMs(s.Node, now), rp, now), nil
}

// whereIn describes repo's entry in view, node self's view of the map
// (ageMs old), without claiming anything.
func whereIn(view cluster.View, self string, ageMs int64, repo names.Repo, now time.Time) Where {
	w := Where{Repo: repo.String(), State: "unowned", View: self, ViewAgeMs: ageMs}
	e, ok := view.Get(repo)
	if !ok {
		return w
	}
	w.State = "live"
	if !e.Live(now) {
		w.State = "expired"
	}
	exp := e.Expires.UTC()
	w.Node, w.Epoch, w.Expires = e.Node, e.Epoch, &exp
	return w
}

// Error codes of a failed command (peer.CodedError.Code); rgit-admin turns each
// into its exit status.
const (
	CodeNotFound    = "not_found"   // the repository or credential does not exist
	CodeUsage       = "usage"       // malformed command or argument
	CodeRefused     = "refused"     // the node would not do it (exists, draining, bad secret)
	CodeUnreachable = "unreachable" // a node, the owner or the leader could not be reached
	CodeFailed      = "failed"      // anything else
)

// codeOf classifies a command's error for scripts.
func codeOf(err error) string {
	switch {
	case errors.Is(err, repo.ErrNotFound), errors.Is(err, auth.ErrUnknownCredential), errors.Is(err, auth.ErrRepoNotFound),
		errors.Is(err, auth.ErrNoKey), errors.Is(err, auth.ErrNoToken), errors.Is(err, repo.ErrNoEntry), errors.Is(err, auth.ErrNoUser),
		errors.Is(err, outbox.ErrNoHook), errors.Is(err, outbox.ErrNoDelivery):
		return CodeNotFound
	case errors.Is(err, ErrUsage), errors.Is(err, errUnknownCommand), errors.Is(err, names.ErrInvalid), errors.Is(err, auth.ErrInvalidKey),
		errors.Is(err, auth.ErrBadRole), errors.Is(err, auth.ErrBadPattern), errors.Is(err, auth.ErrBadScope):
		return CodeUsage
	case errors.Is(err, actors.ErrLeaderUnreachable), errors.Is(err, actors.ErrOwnerUnreachable):
		return CodeUnreachable
	case errors.Is(err, repo.ErrExists), errors.Is(err, auth.ErrKeyInUse), errors.Is(err, actors.ErrDraining),
		errors.Is(err, actors.ErrBusy), errors.Is(err, errHopLimit), errors.Is(err, errForbidden), errors.Is(err, repo.ErrTooMany),
		errors.Is(err, outbox.ErrTooManyHooks), errors.Is(err, errNoHookService):
		return CodeRefused
	}
	return CodeFailed
}
