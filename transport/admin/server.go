package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/peertls"
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
	// PeerTLS is the peer ports' TLS, for relaying to owners; nil: plaintext.
	PeerTLS *peertls.Config
	// Version describes the node's build (cmd/version), for status and
	// version: during a rollout it shows which nodes run what.
	Version string
	// Cache is the read API's answer cache (RGIT_REDIS_URL); nil: none.
	Cache Purger
}

// Purger makes every cached read-API answer of a repository unreachable
// (transport/api.Cache bumps its generation).
type Purger interface {
	Purge(ctx context.Context, owner, name string) error
}

// purge runs after a change that must not stay visible through the cache
// (visibility flip, delete, purge-cache). It fails loudly: the change
// itself stays done, and the error names purge-cache as the retry.
func (s *Server) purge(ctx context.Context, owner, name, done string) (string, error) {
	if s.Cache == nil {
		return done, nil
	}
	if err := s.Cache.Purge(ctx, owner, name); err != nil {
		return "", fmt.Errorf("%s, but %w", done, err)
	}
	return done + "; cached answers purged", nil
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
	ev, err := s.answer(r.Context(), req, out.progress)
	if err != nil {
		s.Log.Warn("admin command failed", zap.String("command", req.Command), zap.Strings("args", req.Args), zap.Error(err))
	}
	out.send(ev)
}

type eventWriter struct {
	mu   sync.Mutex
	w    io.Writer
	rc   *http.ResponseController
	last map[string]time.Time // per stage: when it was last reported
}

func (e *eventWriter) send(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _ := json.Marshal(ev)
	e.w.Write(append(b, '\n'))
	e.rc.Flush()
}

// progress reports each stage at most every 200ms, and always its first
// report and its completion. Stages may report concurrently (a repack
// writes and indexes at once).
func (e *eventWriter) progress(stage string, done, total uint64) {
	now := time.Now()
	e.mu.Lock()
	last, seen := e.last[stage]
	if seen && done != total && now.Sub(last) < 200*time.Millisecond {
		e.mu.Unlock()
		return
	}
	if e.last == nil {
		e.last = map[string]time.Time{}
	}
	e.last[stage] = now
	e.mu.Unlock()
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
	"add-token":      {1, "<owner> [--scope read|write] [--repo <owner>/<name>]... [--expires 30d] [--name <name>]"},
	"list-tokens":    {1, "<owner>"},
	"revoke-token":   {2, "<owner> <token-id>"},
	"add-key":        {1, "<owner> <public-key-file>"},
	"add-deploy-key": {1, "<owner>/<name> <public-key-file> [--write]"},
	"list-keys":      {1, "<owner>"},
	"remove-key":     {2, "<owner> <fingerprint>"},
	"set-visibility": {2, "<owner>/<name> public|private [--as <user>]"},
	"grant":          {3, "<owner>/<name> <user> read|write|admin [--as <user>]"},
	"revoke":         {2, "<owner>/<name> <user> [--as <user>]"},
	"list-access":    {1, "<owner>/<name> [--as <user>]"},
	"protect":        {2, "<owner>/<name> <ref-pattern> [--no-force-push] [--no-delete] [--as <user>]"},
	"unprotect":      {2, "<owner>/<name> <ref-pattern> [--as <user>]"},
	"set-head":       {2, "<owner>/<name> <refname>"},
	"purge-cache":    {1, "<owner>/<name>"},
	"list-repos":     {0, ""},
	"status":         {0, ""},
	"version":        {0, ""},
	"where":          {1, "<owner>/<name>"},
}

// ErrUsage reports a malformed admin command.
var ErrUsage = errors.New("usage")

var errUnknownCommand = errors.New("unknown command")

// checkUsage checks that req names a command with its number of arguments.
func checkUsage(req Request) error {
	c, known := commands[req.Command]
	if !known {
		return fmt.Errorf("%w %q", errUnknownCommand, req.Command)
	}
	if len(req.Args) != c.nargs {
		return fmt.Errorf("%w: %s %s", ErrUsage, req.Command, c.synopsis)
	}
	return nil
}

// run runs the commands without structured results or flags; runCommand
// has checked req's usage.
func (s *Server) run(ctx context.Context, req Request, progress func(string, uint64, uint64)) (string, error) {
	// arg resolves an existing repository to the spelling it is stored
	// under (names are case-insensitive).
	arg := func(i int) (string, string, error) { return s.existing(ctx, req.Args[i]) }
	switch req.Command {
	case "create-repo":
		owner, name, err := s.newName(ctx, req.Args[0])
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
		keys, err := s.Auth.RemoveDeployKeys(ctx, owner+"/"+name)
		for _, k := range keys {
			s.audit(operator, "remove-key", zap.String("repo", k.Repo), zap.String("fingerprint", k.Fingerprint), zap.String("why", "delete-repo"))
		}
		if err != nil {
			return "", fmt.Errorf("deleted %s/%s, but not all its deploy keys (list-keys, remove-key): %w", owner, name, err)
		}
		return s.purge(ctx, owner, name, "deleted "+owner+"/"+name)
	case "fork":
		so, sn, err := arg(0)
		if err != nil {
			return "", err
		}
		do, dn, err := s.newName(ctx, req.Args[1])
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
		p, err := s.Node.Repack(ctx, owner, name, progress)
		if err != nil {
			return "", err
		}
		if p.Name == "" {
			return fmt.Sprintf("%s/%s has nothing to repack", owner, name), nil
		}
		return fmt.Sprintf("repacked %s/%s into %s (%d objects)", owner, name, p.Name, p.Objects), nil
	case "gc":
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		st, err := s.Node.CollectGarbage(ctx, owner, name, s.GCMinAge)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("gc %s/%s: %+v", owner, name, st), nil
	case "set-visibility":
		v := req.Args[1]
		if v != "public" && v != "private" {
			return "", fmt.Errorf("%w: visibility must be public or private, not %q", ErrUsage, v)
		}
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		if err := s.Node.SetVisibility(ctx, owner, name, v == "public"); err != nil {
			return "", err
		}
		return s.purge(ctx, owner, name, owner+"/"+name+" is "+v)
	case "purge-cache":
		owner, name, err := names.Split(req.Args[0])
		if err != nil {
			return "", err
		}
		if s.Cache == nil {
			return "", errors.New("purge-cache: this node has no read-API cache (RGIT_REDIS_URL is unset)")
		}
		return s.purge(ctx, owner, name, "purge-cache "+owner+"/"+name)
	case "set-head":
		owner, name, err := arg(0)
		if err != nil {
			return "", err
		}
		if err := s.Node.SetHead(ctx, owner, name, req.Args[1]); err != nil {
			return "", err
		}
		return "HEAD of " + owner + "/" + name + " is " + req.Args[1], nil
	case "version":
		return s.Version, nil
	}
	return "", fmt.Errorf("%w %q", errUnknownCommand, req.Command)
}

// existing parses "owner/name" and resolves it to the spelling the
// repository is stored under (repo.Canonical).
func (s *Server) existing(ctx context.Context, arg string) (string, string, error) {
	owner, name, err := names.Split(arg)
	if err != nil {
		return "", "", err
	}
	return repo.Canonical(ctx, s.Deps, owner, name)
}

// newName parses the "owner/name" of a repository to create, with the
// owner's canonical spelling (auth.Store.ClaimOwner); a name taken in
// another letter case is refused by repo.Create and repo.Fork.
func (s *Server) newName(ctx context.Context, arg string) (string, string, error) {
	owner, name, err := names.Split(arg)
	if err != nil {
		return "", "", err
	}
	owner, err = s.Auth.ClaimOwner(ctx, owner)
	return owner, name, err
}
