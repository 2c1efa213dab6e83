package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/repo"
)

// Access commands: collaborators, protected refs, tokens and keys (issue
// 13). Their results are typed values (the Data of the final Event, for
// --json) whose String is the text rgit-admin prints.

// flagSpecs lists the flags each command accepts: name → takes a value.
// Flags may appear anywhere among the arguments; "--" ends them.
var flagSpecs = map[string]map[string]bool{
	"grant":          {"as": true},
	"revoke":         {"as": true},
	"list-access":    {"as": true},
	"protect":        {"as": true, "no-force-push": false, "no-delete": false},
	"unprotect":      {"as": true},
	"set-visibility": {"as": true},
	"add-token":      {"scope": true, "repo": true, "expires": true, "name": true},
	"add-deploy-key": {"write": false},
}

// parseFlags splits args into positionals and flags by spec. Repeated
// value flags accumulate (--repo a --repo b).
func parseFlags(args []string, spec map[string]bool) (pos []string, flags map[string][]string, err error) {
	flags = map[string][]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(pos, args[i+1:]...), flags, nil
		}
		name, ok := strings.CutPrefix(a, "--")
		if !ok || name == "" {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(name, "=")
		takes, known := spec[name]
		switch {
		case !known:
			return nil, nil, fmt.Errorf("%w: unknown flag --%s", ErrUsage, name)
		case takes && !hasVal:
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("%w: --%s needs a value", ErrUsage, name)
			}
			i++
			val = args[i]
		case !takes && hasVal:
			return nil, nil, fmt.Errorf("%w: --%s takes no value", ErrUsage, name)
		}
		flags[name] = append(flags[name], val)
	}
	return pos, flags, nil
}

// errForbidden: --as names a user without the role the command needs.
var errForbidden = errors.New("forbidden")

// operator is who an admin command acts as without --as: whoever holds
// the peer secret.
const operator = "rgit-admin"

// AccessList is list-access's result.
type AccessList struct {
	Repo        string            `json:"repo"`
	Public      bool              `json:"public"`
	Grants      []auth.Grant      `json:"grants"`
	Protections []auth.Protection `json:"protections"`
}

func (a AccessList) String() string {
	var b strings.Builder
	vis := "private"
	if a.Public {
		vis = "public"
	}
	fmt.Fprintf(&b, "%s (%s)\nowner: %s (admin)", a.Repo, vis, strings.SplitN(a.Repo, "/", 2)[0])
	for _, g := range a.Grants {
		fmt.Fprintf(&b, "\n%s: %s (granted by %s at %s)", g.User, g.Role, g.CreatedBy, stamp(g.Created))
	}
	for _, p := range a.Protections {
		fmt.Fprintf(&b, "\nprotected %s:%s (by %s at %s)", p.Pattern, protectionFlags(p), p.CreatedBy, stamp(p.Created))
	}
	return b.String()
}

func protectionFlags(p auth.Protection) string {
	s := ""
	if p.NoForcePush {
		s += " no-force-push"
	}
	if p.NoDelete {
		s += " no-delete"
	}
	if s == "" {
		s = " (no restrictions)"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// Message is the result of a command that changed one thing.
type Message struct {
	Text string `json:"message"`
	// Grant, Protection, Token or Key is what was changed, when it is one.
	Grant      *auth.Grant      `json:"grant,omitempty"`
	Protection *auth.Protection `json:"protection,omitempty"`
	Token      *auth.Token      `json:"token,omitempty"`
	Key        *auth.Key        `json:"key,omitempty"`
	// Secret is a new token, shown once.
	Secret string `json:"secret,omitempty"`
}

func (m Message) String() string { return m.Text }

// TokenList is list-tokens' result.
type TokenList struct {
	Tokens []auth.Token `json:"tokens"`
}

func (l TokenList) String() string {
	var b strings.Builder
	b.WriteString("ID            NAME      SCOPE  REPOS  EXPIRES               CREATED               LAST USED")
	for _, t := range l.Tokens {
		repos := "all"
		if len(t.Repos) > 0 {
			repos = strings.Join(t.Repos, ",")
		}
		name := t.Name
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(&b, "\n%-13s %-9s %-6s %-6s %-21s %-21s %s", t.ID, name, t.Scope, repos, stamp(t.Expires), stamp(t.Created), stamp(t.LastUsed))
	}
	return b.String()
}

// KeyList is list-keys' result.
type KeyList struct {
	Keys []auth.Key `json:"keys"`
}

func (l KeyList) String() string {
	var b strings.Builder
	b.WriteString("FINGERPRINT                                         KIND              CREATED")
	for _, k := range l.Keys {
		kind := "user"
		if k.Repo != "" {
			kind = "deploy " + k.Repo
			if k.Write {
				kind += " (write)"
			} else {
				kind += " (read)"
			}
		}
		fmt.Fprintf(&b, "\n%-51s %-17s %s", k.Fingerprint, kind, stamp(k.Created))
	}
	return b.String()
}

// accessCommands are the commands runAccess handles.
var accessCommands = map[string]bool{
	"grant": true, "revoke": true, "list-access": true, "protect": true, "unprotect": true,
	"add-token": true, "list-tokens": true, "revoke-token": true,
	"add-key": true, "add-deploy-key": true, "list-keys": true, "remove-key": true,
}

// runCommand runs req: the access commands here, the others in run. A
// --as <user> (where flagSpecs allows it) first checks that the user may
// do this to the repository, with the same decision git access uses
// (auth.Decide on the settings the repository's writer holds).
func (s *Server) runCommand(ctx context.Context, req Request, progress func(string, uint64, uint64)) (string, any, error) {
	spec, hasFlags := flagSpecs[req.Command]
	var flags map[string][]string
	if hasFlags {
		var err error
		if req.Args, flags, err = parseFlags(req.Args, spec); err != nil {
			return "", nil, err
		}
	}
	if err := checkUsage(req); err != nil {
		return "", nil, err
	}
	who := operator
	if as := flags["as"]; len(as) > 0 {
		who = as[len(as)-1]
		if err := s.authorizeAs(ctx, req, who); err != nil {
			return "", nil, err
		}
	}
	if !accessCommands[req.Command] {
		out, err := s.run(ctx, req, progress)
		if err == nil && req.Command == "set-visibility" {
			s.audit(who, req.Command, zap.String("repo", req.Args[0]), zap.String("visibility", req.Args[1]))
		}
		return out, nil, err
	}
	v, err := s.runAccess(ctx, req, flags, who)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprint(v), v, nil
}

// authorizeAs checks that user may run req on its repository: read for
// list-access, admin for the rest.
func (s *Server) authorizeAs(ctx context.Context, req Request, user string) error {
	if err := names.ValidateOwner(user); err != nil {
		return fmt.Errorf("%w: --as: %w", ErrUsage, err)
	}
	owner, name, err := s.existing(ctx, req.Args[0])
	if err != nil {
		return err
	}
	info, err := s.Node.Settings(ctx, owner, name)
	if err != nil {
		return err
	}
	need := auth.Admin
	if req.Command == "list-access" {
		need = auth.Read
	}
	id := auth.Identity{Owner: user, Authenticated: true}
	if d := auth.Decide(id, info.AccessInfo(), true, need); d != auth.Allow {
		s.audit(user, req.Command, zap.String("repo", owner+"/"+name), zap.String("refused", d.String()))
		if d == auth.NotFound {
			// As over git: a repository the user may not read is missing.
			return fmt.Errorf("%s/%s: %w (as %s)", owner, name, repo.ErrNotFound, user)
		}
		return fmt.Errorf("%s may not %s %s/%s: needs the %s role: %w", user, req.Command, owner, name, need, errForbidden)
	}
	return nil
}

// audit writes the structured line every access change leaves: who, what,
// when (the log's timestamp) and the details.
func (s *Server) audit(who, what string, fields ...zap.Field) {
	s.Log.Info("audit", append([]zap.Field{zap.String("who", who), zap.String("what", what),
		zap.Time("when", time.Now().UTC())}, fields...)...)
}

func (s *Server) runAccess(ctx context.Context, req Request, flags map[string][]string, who string) (any, error) {
	now := time.Now().UTC()
	switch req.Command {
	case "grant", "revoke", "list-access", "protect", "unprotect":
		owner, name, err := s.existing(ctx, req.Args[0])
		if err != nil {
			return nil, err
		}
		return s.repoAccess(ctx, req, flags, who, owner, name, now)
	case "add-token":
		o := auth.TokenOptions{Scope: auth.Scope(last(flags["scope"])), Repos: flags["repo"], Name: last(flags["name"]), CreatedBy: who}
		if e := last(flags["expires"]); e != "" {
			d, err := parseExpiry(e)
			if err != nil {
				return nil, err
			}
			o.Expires = now.Add(d)
		}
		for i, r := range o.Repos {
			ro, rn, err := s.existing(ctx, r)
			if err != nil {
				return nil, fmt.Errorf("--repo %s: %w", r, err)
			}
			o.Repos[i] = ro + "/" + rn
		}
		secret, t, err := s.Auth.IssueToken(ctx, req.Args[0], o)
		if err != nil {
			return nil, err
		}
		fields := []zap.Field{zap.String("owner", t.Owner), zap.String("id", t.ID), zap.String("name", t.Name),
			zap.String("scope", string(t.Scope)), zap.Strings("repos", t.Repos)}
		if !t.Expires.IsZero() {
			fields = append(fields, zap.Time("expires", t.Expires))
		}
		s.audit(who, "add-token", fields...)
		// The secret alone on stdout, as before, so scripts can capture it.
		return Message{Text: secret, Token: &t, Secret: secret}, nil
	case "list-tokens":
		ts, err := s.Auth.ListTokens(ctx, req.Args[0])
		return TokenList{Tokens: ts}, err
	case "revoke-token":
		t, err := s.Auth.RevokeToken(ctx, req.Args[0], req.Args[1])
		if err != nil {
			return nil, err
		}
		s.audit(who, "revoke-token", zap.String("owner", t.Owner), zap.String("id", t.ID), zap.String("name", t.Name))
		return Message{Text: fmt.Sprintf("revoked token %s of %s (other nodes stop accepting it within %s)", t.ID, t.Owner, auth.DefaultPositiveTTL), Token: &t}, nil
	case "add-key":
		k, err := s.Auth.RegisterKey(ctx, req.Args[0], []byte(req.Body), auth.KeyOptions{CreatedBy: who})
		if err != nil {
			return nil, err
		}
		s.audit(who, "add-key", zap.String("owner", k.Owner), zap.String("fingerprint", k.Fingerprint))
		return Message{Text: "added key " + k.Fingerprint + " for " + req.Args[0], Key: &k}, nil
	case "add-deploy-key":
		owner, name, err := s.existing(ctx, req.Args[0])
		if err != nil {
			return nil, err
		}
		k, err := s.Auth.RegisterKey(ctx, owner, []byte(req.Body), auth.KeyOptions{Repo: owner + "/" + name, Write: len(flags["write"]) > 0, CreatedBy: who})
		if err != nil {
			return nil, err
		}
		s.audit(who, "add-deploy-key", zap.String("repo", k.Repo), zap.String("fingerprint", k.Fingerprint), zap.Bool("write", k.Write))
		mode := "read-only"
		if k.Write {
			mode = "read-write"
		}
		return Message{Text: fmt.Sprintf("added %s deploy key %s for %s", mode, k.Fingerprint, k.Repo), Key: &k}, nil
	case "list-keys":
		ks, err := s.Auth.ListKeys(ctx, req.Args[0])
		return KeyList{Keys: ks}, err
	case "remove-key":
		k, err := s.Auth.RemoveKey(ctx, req.Args[0], req.Args[1])
		if err != nil {
			return nil, err
		}
		s.audit(who, "remove-key", zap.String("owner", k.Owner), zap.String("fingerprint", k.Fingerprint), zap.String("repo", k.Repo))
		return Message{Text: fmt.Sprintf("removed key %s of %s", k.Fingerprint, k.Owner), Key: &k}, nil
	}
	return nil, fmt.Errorf("%w %q", errUnknownCommand, req.Command)
}

// repoAccess runs the commands that change or show one repository's
// access settings, through its repo actor.
func (s *Server) repoAccess(ctx context.Context, req Request, flags map[string][]string, who, owner, name string, now time.Time) (any, error) {
	repo := owner + "/" + name
	switch req.Command {
	case "grant":
		role, err := auth.ParseRole(req.Args[2])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUsage, err)
		}
		user, err := s.Auth.ClaimOwner(ctx, req.Args[1])
		if err != nil {
			return nil, err
		}
		g := auth.Grant{User: user, Role: role, CreatedBy: who, Created: now}
		old, err := s.Node.Grant(ctx, owner, name, g)
		if err != nil {
			return nil, err
		}
		s.audit(who, "grant", zap.String("repo", repo), zap.String("user", user), zap.Stringer("role", role), zap.Stringer("previous", old))
		return Message{Text: fmt.Sprintf("%s has %s on %s", user, role, repo), Grant: &g}, nil
	case "revoke":
		old, err := s.Node.Revoke(ctx, owner, name, req.Args[1])
		if err != nil {
			return nil, err
		}
		s.audit(who, "revoke", zap.String("repo", repo), zap.String("user", req.Args[1]), zap.Stringer("previous", old))
		return Message{Text: fmt.Sprintf("revoked %s's %s on %s", req.Args[1], old, repo)}, nil
	case "list-access":
		info, err := s.Node.Settings(ctx, owner, name)
		if err != nil {
			return nil, err
		}
		return AccessList{Repo: repo, Public: info.Public, Grants: nonNil(info.Grants), Protections: nonNil(info.Protections)}, nil
	case "protect":
		p := auth.Protection{Pattern: req.Args[1], NoForcePush: len(flags["no-force-push"]) > 0,
			NoDelete: len(flags["no-delete"]) > 0, CreatedBy: who, Created: now}
		if !p.NoForcePush && !p.NoDelete {
			return nil, fmt.Errorf("%w: protect needs --no-force-push, --no-delete or both", ErrUsage)
		}
		if err := s.Node.Protect(ctx, owner, name, p); err != nil {
			return nil, err
		}
		s.audit(who, "protect", zap.String("repo", repo), zap.String("pattern", p.Pattern),
			zap.Bool("no_force_push", p.NoForcePush), zap.Bool("no_delete", p.NoDelete))
		return Message{Text: fmt.Sprintf("%s protected on %s:%s", p.Pattern, repo, protectionFlags(p)), Protection: &p}, nil
	case "unprotect":
		p, err := s.Node.Unprotect(ctx, owner, name, req.Args[1])
		if err != nil {
			return nil, err
		}
		s.audit(who, "unprotect", zap.String("repo", repo), zap.String("pattern", p.Pattern))
		return Message{Text: fmt.Sprintf("%s no longer protected on %s", p.Pattern, repo), Protection: &p}, nil
	}
	return nil, fmt.Errorf("%w %q", errUnknownCommand, req.Command)
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func last(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// parseExpiry reads "30d" (days) or a Go duration ("12h", "90m").
func parseExpiry(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		days, err = strconv.Atoi(n)
		d = time.Duration(days) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: --expires %q: want a positive duration such as 30d or 12h", ErrUsage, s)
	}
	return d, nil
}

// encodeData is an Event's Data for a typed result (nil: none).
func encodeData(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
