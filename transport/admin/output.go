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

// Status is status' answer: the node's build and its open repositories.
type Status struct {
	Version   string   `json:"version"`
	OpenRepos []string `json:"open_repos"`
}

func (st Status) Text() string {
	return fmt.Sprintf("version: %s\nopen repositories: %d\n%s", st.Version, len(st.OpenRepos), strings.Join(st.OpenRepos, "\n"))
}

func (s *Server) status(ctx context.Context, _ ShowStatus) (Status, error) {
	open, err := s.Node.OpenRepos(ctx)
	if err != nil {
		return Status{}, err
	}
	return Status{Version: s.Version, OpenRepos: nonNil(open)}, nil
}

// Where is where's answer: the repository's entry in this node's view of
// the ownership map. State is "live", "expired", "unowned" (no entry) or
// "single-node" (no map: this node serves everything); Node, Epoch and
// Expires are set for live and expired entries.
type Where struct {
	Repo    string     `json:"repo"`
	State   string     `json:"state"`
	Node    string     `json:"node,omitempty"`
	Epoch   uint64     `json:"epoch,omitempty"`
	Expires *time.Time `json:"expires,omitempty"`
}

func (w Where) Text() string {
	switch w.State {
	case "single-node":
		return w.Repo + " is served by this node (single node)"
	case "unowned":
		return w.Repo + " is unowned"
	}
	return fmt.Sprintf("%s is owned by %s (epoch %d, lease %s, expires %s)", w.Repo, w.Node, w.Epoch, w.State, w.Expires.Format(time.RFC3339Nano))
}

func (s *Server) where(_ context.Context, m WhereIs) (Where, error) {
	owner, name, err := names.Split(m.Repo)
	if err != nil {
		return Where{}, err
	}
	r := owner + "/" + name
	if s.Peers == nil {
		return Where{Repo: r, State: "single-node"}, nil
	}
	return whereIn(s.Node.OwnershipView(), r, time.Now()), nil
}

// whereIn describes repo's entry in view, without claiming anything.
func whereIn(view cluster.View, repo string, now time.Time) Where {
	e, ok := view.Get(repo)
	if !ok {
		return Where{Repo: repo, State: "unowned"}
	}
	state := "live"
	if !e.Live(now) {
		state = "expired"
	}
	exp := e.Expires.UTC()
	return Where{Repo: repo, State: state, Node: e.Node, Epoch: e.Epoch, Expires: &exp}
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
		errors.Is(err, auth.ErrNoKey), errors.Is(err, auth.ErrNoToken), errors.Is(err, repo.ErrNoEntry):
		return CodeNotFound
	case errors.Is(err, ErrUsage), errors.Is(err, errUnknownCommand), errors.Is(err, names.ErrInvalid), errors.Is(err, auth.ErrInvalidKey),
		errors.Is(err, auth.ErrBadRole), errors.Is(err, auth.ErrBadPattern), errors.Is(err, auth.ErrBadScope):
		return CodeUsage
	case errors.Is(err, actors.ErrLeaderUnreachable), errors.Is(err, actors.ErrOwnerUnreachable):
		return CodeUnreachable
	case errors.Is(err, repo.ErrExists), errors.Is(err, auth.ErrKeyInUse), errors.Is(err, actors.ErrDraining),
		errors.Is(err, actors.ErrBusy), errors.Is(err, errHopLimit), errors.Is(err, errForbidden), errors.Is(err, repo.ErrTooMany):
		return CodeRefused
	}
	return CodeFailed
}
