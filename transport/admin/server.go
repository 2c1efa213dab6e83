package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/cluster"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/repo"
)

// Server executes admin commands on one node.
type Server struct {
	Node   *actors.Node
	Deps   repo.Deps
	Auth   *auth.Store
	Secret string
	Log    *zap.Logger
	// GCMinAge is how old an unreferenced pack must be before gc deletes it.
	GCMinAge time.Duration
	// Peers, in cluster mode, finds other nodes: commands on a repository
	// owned elsewhere are relayed to its owner. nil: single node.
	Peers PeerAddrs
	// Version describes the node's build (cmd/version), for status and
	// version: during a rollout it shows which nodes run what.
	Version string
}

// maxRequest bounds an admin request body (a public key at most).
const maxRequest = 1 << 20

// ServeHTTP authenticates the caller and runs one command, streaming events.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if !authorized(w, r, s.Secret, s.Log) {
		return
	}
	var req Request
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRequest)).Decode(&req); err != nil {
		http.Error(w, "bad admin request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if s.relay(w, r, req) {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	out := &eventWriter{w: w, rc: http.NewResponseController(w)}
	s.Log.Info("admin command", zap.String("command", req.Command), zap.Strings("args", req.Args))
	output, err := s.run(r.Context(), req, out.progress)
	if err != nil {
		s.Log.Warn("admin command failed", zap.String("command", req.Command), zap.Strings("args", req.Args), zap.Error(err))
		out.send(Event{Error: err.Error(), Done: true})
		return
	}
	out.send(Event{Output: output, Done: true})
}

type eventWriter struct {
	mu   sync.Mutex
	w    io.Writer
	rc   *http.ResponseController
	last time.Time
}

func (e *eventWriter) send(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _ := json.Marshal(ev)
	e.w.Write(append(b, '\n'))
	e.rc.Flush()
}

// progress reports a stage at most every 200ms, and always its completion.
func (e *eventWriter) progress(stage string, done, total uint64) {
	now := time.Now()
	if done != total && now.Sub(e.last) < 200*time.Millisecond {
		return
	}
	e.last = now
	msg := fmt.Sprintf("%s: %d", stage, done)
	if total > 0 {
		msg = fmt.Sprintf("%s: %3d%% (%d/%d)", stage, done*100/total, done, total)
	}
	e.send(Event{Progress: msg})
}

// commands lists every command with its argument count and synopsis.
var commands = map[string]struct {
	nargs    int
	synopsis string
}{
	"create-repo":    {1, "<owner>/<name>"},
	"delete-repo":    {1, "<owner>/<name>"},
	"fork":           {2, "<src-owner>/<src-name> <owner>/<name>"},
	"repack":         {1, "<owner>/<name>"},
	"gc":             {1, "<owner>/<name>"},
	"add-token":      {1, "<owner>"},
	"add-key":        {1, "<owner> <public-key-file>"},
	"set-visibility": {2, "<owner>/<name> public|private"},
	"set-head":       {2, "<owner>/<name> <refname>"},
	"list-repos":     {0, ""},
	"status":         {0, ""},
	"version":        {0, ""},
	"where":          {1, "<owner>/<name>"},
}

// ErrUsage reports a malformed admin command.
var ErrUsage = errors.New("usage")

func (s *Server) run(ctx context.Context, req Request, progress func(string, uint64, uint64)) (string, error) {
	c, known := commands[req.Command]
	if !known {
		return "", fmt.Errorf("unknown command %q", req.Command)
	}
	if len(req.Args) != c.nargs {
		return "", fmt.Errorf("%w: %s %s", ErrUsage, req.Command, c.synopsis)
	}
	arg := func(i int) (string, string, error) { return splitRepo(req.Args[i]) }
	switch req.Command {
	case "create-repo":
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		if err := repo.Create(ctx, s.Deps, owner, name); err != nil {
			return "", err
		}
		return "created " + owner + "/" + name, nil
	case "delete-repo":
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		if err := s.Node.CloseRepo(ctx, owner, name); err != nil {
			return "", err
		}
		if err := repo.Delete(ctx, s.Deps, owner, name); err != nil {
			return "", err
		}
		return "deleted " + owner + "/" + name, nil
	case "fork":
		so, sn, err := arg(0)
		if err != nil {
			return "", err
		}
		do, dn, err := arg(1)
		if err != nil {
			return "", err
		}
		sess, err := s.Node.Session(ctx, so, sn)
		if err != nil {
			return "", err
		}
		defer sess.Release()
		if err := repo.Fork(ctx, s.Deps, sess.Snapshot, do, dn); err != nil {
			return "", err
		}
		return fmt.Sprintf("forked %s/%s to %s/%s", so, sn, do, dn), nil
	case "repack":
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		v, err := s.Node.Do(ctx, owner, name, func(r *repo.Repo) (any, error) { return r.Repack(ctx, progress) })
		if err != nil {
			return "", err
		}
		p := v.(repo.PackInfo)
		return fmt.Sprintf("repacked %s/%s into %s (%d objects)", owner, name, p.Name, p.Objects), nil
	case "gc":
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		st, err := repo.GC(ctx, s.Deps, owner, name, time.Now(), s.GCMinAge)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("gc %s/%s: %+v", owner, name, st), nil
	case "add-token":
		if err := auth.ValidateOwner(req.Args[0]); err != nil {
			return "", err
		}
		return s.Auth.CreateToken(ctx, req.Args[0])
	case "add-key":
		if err := auth.ValidateOwner(req.Args[0]); err != nil {
			return "", err
		}
		fp, err := s.Auth.AddKey(ctx, req.Args[0], []byte(req.Body))
		if err != nil {
			return "", err
		}
		return "added key " + fp + " for " + req.Args[0], nil
	case "set-visibility":
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		v := req.Args[1]
		if v != "public" && v != "private" {
			return "", fmt.Errorf("%w: visibility must be public or private, not %q", ErrUsage, v)
		}
		if _, err := s.Node.Do(ctx, owner, name, func(r *repo.Repo) (any, error) {
			return nil, r.SetVisibility(ctx, v == "public")
		}); err != nil {
			return "", err
		}
		return owner + "/" + name + " is " + v, nil
	case "set-head":
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		if _, err := s.Node.Do(ctx, owner, name, func(r *repo.Repo) (any, error) {
			return nil, r.SetHead(ctx, req.Args[1])
		}); err != nil {
			return "", err
		}
		return "HEAD of " + owner + "/" + name + " is " + req.Args[1], nil
	case "list-repos":
		names, err := repo.List(ctx, s.Deps)
		if err != nil {
			return "", err
		}
		return strings.Join(names, "\n"), nil
	case "where":
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		if s.Peers == nil {
			return owner + "/" + name + " is served by this node (single node)", nil
		}
		return where(s.Node.OwnershipView(), owner+"/"+name, time.Now()), nil
	case "status":
		open, err := s.Node.OpenRepos(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("version: %s\nopen repositories: %d\n%s", s.Version, len(open), strings.Join(open, "\n")), nil
	case "version":
		return s.Version, nil
	}
	return "", fmt.Errorf("unknown command %q", req.Command)
}

// where describes a repository's entry in this node's view of the
// ownership map, without claiming anything.
func where(view cluster.View, repo string, now time.Time) string {
	e, ok := view.Get(repo)
	if !ok {
		return repo + " is unowned"
	}
	state := "live"
	if !e.Live(now) {
		state = "expired"
	}
	return fmt.Sprintf("%s is owned by %s (epoch %d, lease %s, expires %s)", repo, e.Node, e.Epoch, state, e.Expires.UTC().Format(time.RFC3339Nano))
}

func splitRepo(s string) (string, string, error) {
	owner, name, ok := strings.Cut(strings.TrimSuffix(s, ".git"), "/")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not <owner>/<name>", repo.ErrInvalidName, s)
	}
	return owner, name, repo.ValidateName(owner, name)
}
