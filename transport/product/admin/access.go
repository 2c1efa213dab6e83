package admin

import (
	"context"
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

func (a AccessList) Text() string {
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
	Summary string `json:"message"`
	// Grant, Protection, Token or Key is what was changed, when it is one.
	Grant      *auth.Grant      `json:"grant,omitempty"`
	Protection *auth.Protection `json:"protection,omitempty"`
	Token      *auth.Token      `json:"token,omitempty"`
	Key        *auth.Key        `json:"key,omitempty"`
	// Secret is a new token, shown once.
	Secret string `json:"secret,omitempty"`
}

func (m Message) Text() string { return m.Summary }

// TokenList is list-tokens' result.
type TokenList struct {
	Tokens []auth.Token `json:"tokens"`
}

func (l TokenList) Text() string {
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

func (l KeyList) Text() string {
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

// actingAs returns who a command on repository arg acts as: the
// operator, or with --as the user as, once it is checked that as may do
// it (command list-access needs read, the others admin), with the same
// decision git access uses (auth.Decide on the settings the repository's
// writer holds).
func (s *Server) actingAs(ctx context.Context, command, arg, as string) (string, error) {
	if as == "" {
		return operator, nil
	}
	if err := names.ValidateOwner(as); err != nil {
		return "", fmt.Errorf("%w: --as: %w", ErrUsage, err)
	}
	rp, err := s.existing(ctx, arg)
	if err != nil {
		return "", err
	}
	info, err := s.Node.Settings(ctx, rp)
	if err != nil {
		return "", err
	}
	need := auth.Admin
	if command == "list-access" {
		need = auth.Read
	}
	id := auth.Identity{Owner: as, Authenticated: true}
	if d := auth.Decide(id, info, true, need); d != auth.Allow {
		s.audit(as, command, zap.String("repo", rp.String()), zap.String("refused", d.String()))
		if d == auth.NotFound {
			// As over git: a repository the user may not read is missing.
			return "", fmt.Errorf("%s: %w (as %s)", rp, repo.ErrNotFound, as)
		}
		return "", fmt.Errorf("%s may not %s %s: needs the %s role: %w", as, command, rp, need, errForbidden)
	}
	return as, nil
}

// audit writes the structured line every access change leaves: who, what,
// when (the log's timestamp) and the details.
func (s *Server) audit(who, what string, fields ...zap.Field) {
	s.Log.Info("audit", append([]zap.Field{zap.String("who", who), zap.String("what", what),
		zap.Time("when", time.Now().UTC())}, fields...)...)
}

// accessTo resolves the repository of a command that changes or shows its
// access settings and who the command acts as.
func (s *Server) accessTo(ctx context.Context, command, arg, as string) (who string, rp names.Repo, err error) {
	if who, err = s.actingAs(ctx, command, arg, as); err != nil {
		return "", names.Repo{}, err
	}
	rp, err = s.existing(ctx, arg)
	return who, rp, err
}

func (s *Server) grant(ctx context.Context, m Grant) (Message, error) {
	who, rp, err := s.accessTo(ctx, "grant", m.Repo, m.As)
	if err != nil {
		return Message{}, err
	}
	role, err := auth.ParseRole(m.Role)
	if err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	user, err := s.Auth.User(ctx, m.User)
	isNew := errors.Is(err, auth.ErrNoUser)
	switch {
	case isNew && !m.NewUser:
		return Message{}, fmt.Errorf("%w; check the spelling, or grant with --new-user", err)
	case isNew:
		user, err = s.Auth.ClaimOwner(ctx, m.User)
	}
	if err != nil {
		return Message{}, err
	}
	g := auth.Grant{User: user, Role: role, CreatedBy: who, Created: time.Now().UTC()}
	old, err := s.Node.Grant(ctx, rp, g)
	if err != nil {
		return Message{}, err
	}
	r := rp.String()
	s.audit(who, "grant", zap.String("repo", r), zap.String("user", user), zap.Stringer("role", role), zap.Stringer("previous", old),
		zap.Bool("new_user", isNew))
	summary := fmt.Sprintf("%s has %s on %s", user, role, r)
	if isNew {
		summary += fmt.Sprintf(" (%s is a new user: it has no token or key yet; add-token or add-key gives it one)", user)
	}
	return Message{Summary: summary, Grant: &g}, nil
}

func (s *Server) revoke(ctx context.Context, m Revoke) (Message, error) {
	who, rp, err := s.accessTo(ctx, "revoke", m.Repo, m.As)
	if err != nil {
		return Message{}, err
	}
	old, err := s.Node.Revoke(ctx, rp, m.User)
	if err != nil {
		return Message{}, err
	}
	r := rp.String()
	s.audit(who, "revoke", zap.String("repo", r), zap.String("user", m.User), zap.Stringer("previous", old))
	return Message{Summary: fmt.Sprintf("revoked %s's %s on %s", m.User, old, r)}, nil
}

func (s *Server) listAccess(ctx context.Context, m ListAccess) (AccessList, error) {
	_, rp, err := s.accessTo(ctx, "list-access", m.Repo, m.As)
	if err != nil {
		return AccessList{}, err
	}
	info, err := s.Node.Settings(ctx, rp)
	if err != nil {
		return AccessList{}, err
	}
	return AccessList{Repo: rp.String(), Public: info.Public, Grants: nonNil(info.Grants), Protections: nonNil(info.Protections)}, nil
}

func (s *Server) protect(ctx context.Context, m Protect) (Message, error) {
	who, rp, err := s.accessTo(ctx, "protect", m.Repo, m.As)
	if err != nil {
		return Message{}, err
	}
	p := auth.Protection{Pattern: m.Pattern, NoForcePush: m.NoForcePush, NoDelete: m.NoDelete, CreatedBy: who, Created: time.Now().UTC()}
	if !p.NoForcePush && !p.NoDelete {
		// A protection that refuses nothing is no protection: a pattern
		// alone asks for the whole of it.
		p.NoForcePush, p.NoDelete = true, true
	}
	if err := s.Node.Protect(ctx, rp, p); err != nil {
		return Message{}, err
	}
	r := rp.String()
	s.audit(who, "protect", zap.String("repo", r), zap.String("pattern", p.Pattern),
		zap.Bool("no_force_push", p.NoForcePush), zap.Bool("no_delete", p.NoDelete))
	return Message{Summary: fmt.Sprintf("%s protected on %s:%s", p.Pattern, r, protectionFlags(p)), Protection: &p}, nil
}

func (s *Server) unprotect(ctx context.Context, m Unprotect) (Message, error) {
	who, rp, err := s.accessTo(ctx, "unprotect", m.Repo, m.As)
	if err != nil {
		return Message{}, err
	}
	p, err := s.Node.Unprotect(ctx, rp, m.Pattern)
	if err != nil {
		return Message{}, err
	}
	r := rp.String()
	s.audit(who, "unprotect", zap.String("repo", r), zap.String("pattern", p.Pattern))
	return Message{Summary: fmt.Sprintf("%s no longer protected on %s", p.Pattern, r), Protection: &p}, nil
}

func (s *Server) addToken(ctx context.Context, m AddToken) (Message, error) {
	o := auth.TokenOptions{Scope: auth.Scope(m.Scope), Repos: append([]string(nil), m.Repos...), Name: m.Name, CreatedBy: operator}
	if m.Expires != "" {
		d, err := parseExpiry(m.Expires)
		if err != nil {
			return Message{}, err
		}
		o.Expires = time.Now().UTC().Add(d)
	}
	for i, r := range o.Repos {
		rr, err := s.existing(ctx, r)
		if err != nil {
			return Message{}, fmt.Errorf("--repo %s: %w", r, err)
		}
		o.Repos[i] = rr.String()
	}
	secret, t, err := s.Auth.IssueToken(ctx, m.Owner, o)
	if err != nil {
		return Message{}, err
	}
	fields := []zap.Field{zap.String("owner", t.Owner), zap.String("id", t.ID), zap.String("name", t.Name),
		zap.String("scope", string(t.Scope)), zap.Strings("repos", t.Repos)}
	if !t.Expires.IsZero() {
		fields = append(fields, zap.Time("expires", t.Expires))
	}
	s.audit(operator, "add-token", fields...)
	// The secret alone on stdout, as before, so scripts can capture it.
	return Message{Summary: secret, Token: &t, Secret: secret}, nil
}

func (s *Server) listTokens(ctx context.Context, m ListTokens) (TokenList, error) {
	if err := s.user(ctx, m.Owner); err != nil {
		return TokenList{}, err
	}
	ts, err := s.Auth.ListTokens(ctx, m.Owner)
	return TokenList{Tokens: nonNil(ts)}, err
}

// user checks that name is a user (auth.Store.User): listing the tokens
// or keys of a name nothing was made for is a mistake, not an empty list.
func (s *Server) user(ctx context.Context, name string) error {
	_, err := s.Auth.User(ctx, name)
	return err
}

func (s *Server) revokeToken(ctx context.Context, m RevokeToken) (Message, error) {
	t, err := s.Auth.RevokeToken(ctx, m.Owner, m.ID)
	if err != nil {
		return Message{}, err
	}
	s.audit(operator, "revoke-token", zap.String("owner", t.Owner), zap.String("id", t.ID), zap.String("name", t.Name))
	return Message{Summary: fmt.Sprintf("revoked token %s of %s (other nodes stop accepting it within %s)", t.ID, t.Owner, auth.DefaultPositiveTTL), Token: &t}, nil
}

func (s *Server) addKey(ctx context.Context, m AddKey) (Message, error) {
	k, err := s.Auth.RegisterKey(ctx, m.Owner, []byte(m.Key), auth.KeyOptions{CreatedBy: operator})
	if err != nil {
		return Message{}, err
	}
	s.audit(operator, "add-key", zap.String("owner", k.Owner), zap.String("fingerprint", k.Fingerprint))
	return Message{Summary: "added key " + k.Fingerprint + " for " + m.Owner, Key: &k}, nil
}

func (s *Server) addDeployKey(ctx context.Context, m AddDeployKey) (Message, error) {
	rp, err := s.existing(ctx, m.Repo)
	if err != nil {
		return Message{}, err
	}
	k, err := s.Auth.RegisterKey(ctx, rp.Owner(), []byte(m.Key), auth.KeyOptions{Repo: rp.String(), Write: m.Write, CreatedBy: operator})
	if err != nil {
		return Message{}, err
	}
	s.audit(operator, "add-deploy-key", zap.String("repo", k.Repo), zap.String("fingerprint", k.Fingerprint), zap.Bool("write", k.Write))
	mode := "read-only"
	if k.Write {
		mode = "read-write"
	}
	return Message{Summary: fmt.Sprintf("added %s deploy key %s for %s", mode, k.Fingerprint, k.Repo), Key: &k}, nil
}

func (s *Server) listKeys(ctx context.Context, m ListKeys) (KeyList, error) {
	if err := s.user(ctx, m.Owner); err != nil {
		return KeyList{}, err
	}
	ks, err := s.Auth.ListKeys(ctx, m.Owner)
	return KeyList{Keys: nonNil(ks)}, err
}

func (s *Server) removeKey(ctx context.Context, m RemoveKey) (Message, error) {
	k, err := s.Auth.RemoveKey(ctx, m.Owner, m.Fingerprint)
	if err != nil {
		return Message{}, err
	}
	s.audit(operator, "remove-key", zap.String("owner", k.Owner), zap.String("fingerprint", k.Fingerprint), zap.String("repo", k.Repo))
	return Message{Summary: fmt.Sprintf("removed key %s of %s", k.Fingerprint, k.Owner), Key: &k}, nil
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
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
