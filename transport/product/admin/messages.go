// Package admin is the operator channel of a running node: rgit-admin
// turns a command line into one typed message (Parse: CreateRepo, Repack,
// Grant, …) and sends it in the peer envelope (transport/frontend/peer) to the
// node's peer stream port, authenticated by the peer secret. The node runs
// it through the owning repo actor, so nothing has to be stopped and no
// second writer is ever opened; a message about a repository another node
// owns is passed on to the owner as the same value, with the next hop.
// The answer streams progress lines, then the message's typed reply
// (Done, Message, AccessList, …), which is what `rgit-admin --json`
// prints. This package may import actors/ and storage/.
package admin

import (
	"fmt"
	"sort"
	"strings"
)

// Msg is an admin message: one Go type per operation, each with its reply
// type. The same value travels from rgit-admin to the node and from there
// to the repository's owner.
type Msg interface {
	// op names the command (for logs) and returns a new reply to decode
	// the answer into.
	op() (command string, reply Result)
}

// routed is a message about one repository that its owner runs; target
// is that repository as the operator spelled it.
type routed interface {
	Msg
	target() string
}

// Messages. Repository arguments are "owner/name" as typed; the node
// resolves their stored spelling. As, where present, is --as: the user
// the command acts as (empty: the operator).
type (
	CreateRepo struct {
		Repo string `json:"repo"`
	}
	DeleteRepo struct {
		Repo string `json:"repo"`
	}
	Fork struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	Repack struct {
		Repo string `json:"repo"`
	}
	GC struct {
		Repo string `json:"repo"`
	}
	SetVisibility struct {
		Repo       string `json:"repo"`
		Visibility string `json:"visibility"` // public or private
		As         string `json:"as,omitempty"`
	}
	SetHead struct {
		Repo string `json:"repo"`
		Ref  string `json:"ref"`
	}
	PurgeCache struct {
		Repo string `json:"repo"`
	}
	// Grant refuses a user who is not one yet (no token, key or
	// repository) unless NewUser: a mistyped name must not become a user.
	Grant struct {
		Repo    string `json:"repo"`
		User    string `json:"user"`
		Role    string `json:"role"`
		As      string `json:"as,omitempty"`
		NewUser bool   `json:"new_user,omitempty"`
	}
	Revoke struct {
		Repo string `json:"repo"`
		User string `json:"user"`
		As   string `json:"as,omitempty"`
	}
	ListAccess struct {
		Repo string `json:"repo"`
		As   string `json:"as,omitempty"`
	}
	// Protect with neither NoForcePush nor NoDelete protects against
	// both.
	Protect struct {
		Repo        string `json:"repo"`
		Pattern     string `json:"pattern"`
		NoForcePush bool   `json:"no_force_push,omitempty"`
		NoDelete    bool   `json:"no_delete,omitempty"`
		As          string `json:"as,omitempty"`
	}
	Unprotect struct {
		Repo    string `json:"repo"`
		Pattern string `json:"pattern"`
		As      string `json:"as,omitempty"`
	}
	AddToken struct {
		Owner   string   `json:"owner"`
		Scope   string   `json:"scope,omitempty"`
		Repos   []string `json:"repos,omitempty"`
		Expires string   `json:"expires,omitempty"` // 30d, 12h, …: from when the node runs it
		Name    string   `json:"name,omitempty"`
	}
	ListTokens struct {
		Owner string `json:"owner"`
	}
	RevokeToken struct {
		Owner string `json:"owner"`
		ID    string `json:"id"`
	}
	// AddKey and AddDeployKey carry the public key itself; rgit-admin
	// reads it from the file named on its command line.
	AddKey struct {
		Owner string `json:"owner"`
		Key   string `json:"key"`
	}
	AddDeployKey struct {
		Repo  string `json:"repo"`
		Key   string `json:"key"`
		Write bool   `json:"write,omitempty"`
	}
	ListKeys struct {
		Owner string `json:"owner"`
	}
	RemoveKey struct {
		Owner       string `json:"owner"`
		Fingerprint string `json:"fingerprint"`
	}
	ListRepos  struct{}
	ShowStatus struct{}
	// WhereIs asks for the repository's entry in the node's ownership view.
	WhereIs struct {
		Repo string `json:"repo"`
	}
	Version struct{}
	// ShowRollout asks for the node's rollout status (RolloutStatus).
	ShowRollout struct{}
	// HostKey asks for the known_hosts line of the node's SSH host key,
	// for clients reaching it as Host ("name" or "name:port"; empty: the
	// node's SSH address, on loopback as 127.0.0.1 and localhost).
	HostKey struct {
		Host string `json:"host,omitempty"`
	}
)

func (CreateRepo) op() (string, Result)    { return "create-repo", new(Done) }
func (DeleteRepo) op() (string, Result)    { return "delete-repo", new(Done) }
func (Fork) op() (string, Result)          { return "fork", new(Done) }
func (Repack) op() (string, Result)        { return "repack", new(Done) }
func (GC) op() (string, Result)            { return "gc", new(Done) }
func (SetVisibility) op() (string, Result) { return "set-visibility", new(Done) }
func (SetHead) op() (string, Result)       { return "set-head", new(Done) }
func (PurgeCache) op() (string, Result)    { return "purge-cache", new(Done) }
func (Grant) op() (string, Result)         { return "grant", new(Message) }
func (Revoke) op() (string, Result)        { return "revoke", new(Message) }
func (ListAccess) op() (string, Result)    { return "list-access", new(AccessList) }
func (Protect) op() (string, Result)       { return "protect", new(Message) }
func (Unprotect) op() (string, Result)     { return "unprotect", new(Message) }
func (AddToken) op() (string, Result)      { return "add-token", new(Message) }
func (ListTokens) op() (string, Result)    { return "list-tokens", new(TokenList) }
func (RevokeToken) op() (string, Result)   { return "revoke-token", new(Message) }
func (AddKey) op() (string, Result)        { return "add-key", new(Message) }
func (AddDeployKey) op() (string, Result)  { return "add-deploy-key", new(Message) }
func (ListKeys) op() (string, Result)      { return "list-keys", new(KeyList) }
func (RemoveKey) op() (string, Result)     { return "remove-key", new(Message) }
func (ListRepos) op() (string, Result)     { return "list-repos", new(Repos) }
func (ShowStatus) op() (string, Result)    { return "status", new(Status) }
func (WhereIs) op() (string, Result)       { return "where", new(Where) }
func (Version) op() (string, Result)       { return "version", new(Done) }
func (ShowRollout) op() (string, Result)   { return "rollout-status", new(RolloutStatus) }
func (HostKey) op() (string, Result)       { return "host-key", new(Done) }

// The messages their repository's owner runs (the others act on the
// store, on credentials or on the node that receives them).
func (m DeleteRepo) target() string    { return m.Repo }
func (m Fork) target() string          { return m.From }
func (m Repack) target() string        { return m.Repo }
func (m GC) target() string            { return m.Repo }
func (m SetVisibility) target() string { return m.Repo }
func (m SetHead) target() string       { return m.Repo }
func (m Grant) target() string         { return m.Repo }
func (m Revoke) target() string        { return m.Repo }
func (m ListAccess) target() string    { return m.Repo }
func (m Protect) target() string       { return m.Repo }
func (m Unprotect) target() string     { return m.Repo }

// commands lists every command line: its positional arguments, synopsis,
// one-line description, flags (name → takes a value; anywhere among the
// arguments, "--" ends them) and how it becomes a message.
var commands = map[string]struct {
	nargs    int
	synopsis string
	desc     string
	flags    map[string]bool
	msg      func(a []string, f flagSet) Msg
}{
	"create-repo": {1, "<owner>/<name>", "create an empty private repository (HEAD → refs/heads/main)", nil,
		func(a []string, _ flagSet) Msg { return CreateRepo{Repo: a[0]} }},
	"delete-repo": {1, "<owner>/<name>", "delete a repository: its database, every pack and its deploy keys", nil,
		func(a []string, _ flagSet) Msg { return DeleteRepo{Repo: a[0]} }},
	"fork": {2, "<src-owner>/<src-name> <owner>/<name>", "copy a repository server-side (packs and refs); the fork starts private", nil,
		func(a []string, _ flagSet) Msg { return Fork{From: a[0], To: a[1]} }},
	"repack": {1, "<owner>/<name>", "rewrite everything reachable into one pack, while the repository keeps serving", nil,
		func(a []string, _ flagSet) Msg { return Repack{Repo: a[0]} }},
	"gc": {1, "<owner>/<name>", "delete packs nothing references (older than an hour) and retired packs past their grace period; abort uploads a killed node left unfinished (older than a day)", nil,
		func(a []string, _ flagSet) Msg { return GC{Repo: a[0]} }},
	"add-token": {1, "<owner> [--scope read|write] [--repo <owner>/<name>]... [--expires 30d] [--name <name>]",
		"print a new access token for owner (a new user if it has nothing yet); only its hash is stored",
		map[string]bool{"scope": true, "repo": true, "expires": true, "name": true},
		func(a []string, f flagSet) Msg {
			return AddToken{Owner: a[0], Scope: f.last("scope"), Repos: f["repo"], Expires: f.last("expires"), Name: f.last("name")}
		}},
	"list-tokens": {1, "<owner>", "list a user's tokens (never their secrets)", nil,
		func(a []string, _ flagSet) Msg { return ListTokens{Owner: a[0]} }},
	"revoke-token": {2, "<owner> <token-id>", "revoke a token (its id from list-tokens)", nil,
		func(a []string, _ flagSet) Msg { return RevokeToken{Owner: a[0], ID: a[1]} }},
	"add-key": {2, "<owner> <public-key-file>", "register an SSH public key for owner (a new user if it has nothing yet)", nil,
		func(a []string, _ flagSet) Msg { return AddKey{Owner: a[0], Key: a[1]} }},
	"add-deploy-key": {2, "<owner>/<name> <public-key-file> [--write]", "register an SSH key for one repository only, read-only unless --write",
		map[string]bool{"write": false},
		func(a []string, f flagSet) Msg { return AddDeployKey{Repo: a[0], Key: a[1], Write: f.has("write")} }},
	"list-keys": {1, "<owner>", "list a user's SSH keys and their repositories' deploy keys", nil,
		func(a []string, _ flagSet) Msg { return ListKeys{Owner: a[0]} }},
	"remove-key": {2, "<owner> <fingerprint>", "remove an SSH key or deploy key (its SHA256:… fingerprint from list-keys)", nil,
		func(a []string, _ flagSet) Msg { return RemoveKey{Owner: a[0], Fingerprint: a[1]} }},
	"set-visibility": {2, "<owner>/<name> public|private [--as <user>]", "make a repository public (anyone may read it) or private", asFlag,
		func(a []string, f flagSet) Msg { return SetVisibility{Repo: a[0], Visibility: a[1], As: f.last("as")} }},
	"grant": {3, "<owner>/<name> <user> read|write|admin [--new-user] [--as <user>]",
		"make user a collaborator with that role; --new-user if user has no token, key or repository yet",
		map[string]bool{"as": true, "new-user": false},
		func(a []string, f flagSet) Msg {
			return Grant{Repo: a[0], User: a[1], Role: a[2], As: f.last("as"), NewUser: f.has("new-user")}
		}},
	"revoke": {2, "<owner>/<name> <user> [--as <user>]", "remove a collaborator", asFlag,
		func(a []string, f flagSet) Msg { return Revoke{Repo: a[0], User: a[1], As: f.last("as")} }},
	"list-access": {1, "<owner>/<name> [--as <user>]", "show visibility, collaborators and protected ref patterns", asFlag,
		func(a []string, f flagSet) Msg { return ListAccess{Repo: a[0], As: f.last("as")} }},
	"protect": {2, "<owner>/<name> <ref-pattern> [--no-force-push] [--no-delete] [--as <user>]",
		"refuse force-pushes and/or deletes of matching refs (neither flag: both)",
		map[string]bool{"as": true, "no-force-push": false, "no-delete": false},
		func(a []string, f flagSet) Msg {
			return Protect{Repo: a[0], Pattern: a[1], NoForcePush: f.has("no-force-push"), NoDelete: f.has("no-delete"), As: f.last("as")}
		}},
	"unprotect": {2, "<owner>/<name> <ref-pattern> [--as <user>]", "remove a ref pattern's protection", asFlag,
		func(a []string, f flagSet) Msg { return Unprotect{Repo: a[0], Pattern: a[1], As: f.last("as")} }},
	"set-head": {2, "<owner>/<name> <refname>", "point HEAD at another branch", nil,
		func(a []string, _ flagSet) Msg { return SetHead{Repo: a[0], Ref: a[1]} }},
	"purge-cache": {1, "<owner>/<name>", "make every cached read-API answer of the repository unreachable (Redis)", nil,
		func(a []string, _ flagSet) Msg { return PurgeCache{Repo: a[0]} }},
	"list-repos": {0, "", "list every repository", nil, func([]string, flagSet) Msg { return ListRepos{} }},
	"status": {0, "", "show the node: version, name, leader, live members, open repositories", nil,
		func([]string, flagSet) Msg { return ShowStatus{} }},
	"version": {0, "", "print rgit-admin's version and the node's", nil, func([]string, flagSet) Msg { return Version{} }},
	"where": {1, "<owner>/<name>", "show which node owns a repository, in this node's view of the ownership map", nil,
		func(a []string, _ flagSet) Msg { return WhereIs{Repo: a[0]} }},
	"rollout-status": {0, "", "print the node's rollout status as JSON (what the rollout gate reads)", nil,
		func([]string, flagSet) Msg { return ShowRollout{} }},
	"add-hook": {2, "<owner>/<name> <url> [--secret <secret>] [--events push,create,delete,tag,visibility,access] [--as <user>]",
		"send the repository's events to url (default: push), signed with the secret (generated and shown once when not given)",
		map[string]bool{"as": true, "secret": true, "events": true},
		func(a []string, f flagSet) Msg {
			return AddHook{Repo: a[0], URL: a[1], Secret: f.last("secret"), Events: f.last("events"), As: f.last("as")}
		}},
	"list-hooks": {1, "<owner>/<name> [--as <user>]", "list a repository's webhooks (never their secrets) and their waiting deliveries", asFlag,
		func(a []string, f flagSet) Msg { return ListHooks{Repo: a[0], As: f.last("as")} }},
	"remove-hook": {2, "<owner>/<name> <hook-id> [--as <user>]", "remove a webhook with its waiting deliveries", asFlag,
		func(a []string, f flagSet) Msg { return RemoveHook{Repo: a[0], ID: a[1], As: f.last("as")} }},
	"test-hook": {2, "<owner>/<name> <hook-id> [--as <user>]", "send a ping event to a webhook now and show its answer", asFlag,
		func(a []string, f flagSet) Msg { return TestHook{Repo: a[0], ID: a[1], As: f.last("as")} }},
	"deliveries": {1, "<owner>/<name> [--hook <hook-id>] [--failed] [--as <user>]",
		"list a repository's webhook deliveries, newest first: waiting, delivered and failed (--failed: given up only)",
		map[string]bool{"as": true, "hook": true, "failed": false},
		func(a []string, f flagSet) Msg {
			return ListDeliveries{Repo: a[0], Hook: f.last("hook"), Failed: f.has("failed"), As: f.last("as")}
		}},
	"redeliver": {2, "<owner>/<name> <delivery-id> [--as <user>]", "send a delivery again, under the same delivery id (receivers de-duplicate by it)", asFlag,
		func(a []string, f flagSet) Msg { return Redeliver{Repo: a[0], ID: a[1], As: f.last("as")} }},
	"host-key": {0, "[--host <name>[:<port>]]", "print the known_hosts line of the node's SSH host key", map[string]bool{"host": true},
		func(_ []string, f flagSet) Msg { return HostKey{Host: f.last("host")} }},
}

var asFlag = map[string]bool{"as": true}

// Parse turns a command line into its message. For add-key and
// add-deploy-key the key argument is the public key itself (rgit-admin
// reads the file first). A malformed line is a *CommandError with
// CodeUsage, as the node would answer it.
func Parse(command string, args []string) (Msg, error) {
	c, known := commands[command]
	if !known {
		return nil, usageError(fmt.Errorf("%w %q", errUnknownCommand, command))
	}
	pos, flags := args, flagSet{}
	if c.flags != nil {
		var err error
		if pos, flags, err = parseFlags(args, c.flags); err != nil {
			return nil, usageError(err)
		}
	}
	if len(pos) != c.nargs {
		return nil, usageError(fmt.Errorf("%w: %s", ErrUsage, strings.TrimSpace(command+" "+c.synopsis)))
	}
	return c.msg(pos, flags), nil
}

func usageError(err error) error { return &CommandError{Code: CodeUsage, Msg: err.Error()} }

// flagSet is a command line's flags: name → values, in order.
type flagSet map[string][]string

// last is a flag's last value ("" when absent): a repeated flag overrides.
func (f flagSet) last(name string) string {
	if vs := f[name]; len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return ""
}

func (f flagSet) has(name string) bool { return len(f[name]) > 0 }

// parseFlags splits args into positionals and flags by spec. Repeated
// value flags accumulate (--repo a --repo b).
func parseFlags(args []string, spec map[string]bool) (pos []string, flags flagSet, err error) {
	flags = flagSet{}
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

// Usage returns each command's synopsis and description, sorted by name:
// two lines a command, the description indented.
func Usage() []string {
	var names []string
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	var lines []string
	for _, name := range names {
		c := commands[name]
		lines = append(lines, strings.TrimSpace(name+" "+c.synopsis), "    "+c.desc)
	}
	return lines
}

// Help is one command's usage and description, and whether the command
// exists.
func Help(command string) (string, bool) {
	c, ok := commands[command]
	if !ok {
		return "", false
	}
	return "usage: rgit-admin " + strings.TrimSpace(command+" "+c.synopsis) + "\n\n" + c.desc, true
}
