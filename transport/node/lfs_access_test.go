package node_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// sshAuthenticate runs `git-lfs-authenticate /repo.git op` over SSH with
// key and returns what it answered (its header, on success).
func sshAuthenticate(t *testing.T, env *gitenv.Env, srv *gitenv.Server, key gitenv.Key, repo, op string) (map[string]string, gitenv.Result) {
	t.Helper()
	host, port, _ := net.SplitHostPort(srv.SSHAddr)
	args := append(strings.Fields(gitenv.SSHCommand(key))[1:], "-p", port, "git@"+host, "git-lfs-authenticate /"+repo+".git "+op)
	r := env.Command("", nil, "ssh", args...)
	if !r.OK() {
		return nil, r
	}
	var ans struct {
		Href      string            `json:"href"`
		Header    map[string]string `json:"header"`
		ExpiresIn int               `json:"expires_in"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &ans); err != nil || ans.Header["Authorization"] == "" || ans.ExpiresIn <= 0 ||
		ans.Href != "http://"+srv.HTTPAddr+"/"+repo+".git/info/lfs" {
		t.Fatalf("git-lfs-authenticate answered %q (%v)", r.Stdout, err)
	}
	return ans.Header, r
}

// TestLFSAccessMatrix: the LFS batch answers every kind of caller as git
// would: anonymous, a stranger, a read-only token, tokens limited to one
// repository, read and write collaborators, and deploy keys read-only and
// with write (over SSH, whose git-lfs-authenticate header the batch then
// takes), on a public and a private repository. Download needs read,
// upload write; a private repository is 401 to anonymous callers and 404
// to strangers; over SSH a refusal is git's ERROR line.
func TestLFSAccessMatrix(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := gitenv.New(t)
	for _, r := range []string{"alice/pub", "alice/priv", "alice/other"} {
		srv.CreateRepo(t, r)
		srv.Admin(t, "grant", r, "bob", "write", "--new-user")
		srv.Admin(t, "grant", r, "rea", "read", "--new-user")
	}
	srv.Admin(t, "set-visibility", "alice/pub", "public")
	tokens := map[string]string{
		"anonymous":          "",
		"stranger":           srv.AddToken(t, "carol"),
		"read-only token":    lastLine(srv.Admin(t, "add-token", "alice", "--scope", "read")),
		"token for priv":     lastLine(srv.Admin(t, "add-token", "alice", "--repo", "alice/priv")),
		"token for other":    lastLine(srv.Admin(t, "add-token", "alice", "--repo", "alice/other")),
		"read collaborator":  srv.AddToken(t, "rea"),
		"write collaborator": srv.AddToken(t, "bob"),
	}
	keys := map[string]gitenv.Key{}
	for _, k := range []string{"deploy key read", "deploy key write", "unknown key", "write collaborator key"} {
		keys[k] = env.NewSSHKey(t, strings.ReplaceAll(k, " ", "-"))
	}
	srv.AddKey(t, "bob", keys["write collaborator key"])
	for name, flags := range map[string][]string{"deploy key read": nil, "deploy key write": {"--write"}} {
		pub, err := os.ReadFile(keys[name].Public)
		if err != nil {
			t.Fatal(err)
		}
		srv.Admin(t, "add-deploy-key", append([]string{"alice/priv", string(pub)}, flags...)...)
	}
	oid := strings.Repeat("ab", 32)
	// caller: public download, public upload, private download, private
	// upload; SSH denials are "403" (permission denied) or "404" (not
	// found), as git over SSH says.
	want := map[string][4]int{
		"anonymous":              {200, 401, 401, 401},
		"stranger":               {200, 403, 404, 404},
		"read-only token":        {200, 403, 200, 403},
		"token for priv":         {200, 403, 200, 200},
		"token for other":        {200, 403, 404, 404},
		"read collaborator":      {200, 403, 200, 403},
		"write collaborator":     {200, 200, 200, 200},
		"deploy key read":        {200, 403, 200, 403},
		"deploy key write":       {200, 403, 200, 200},
		"unknown key":            {200, 404, 404, 404},
		"write collaborator key": {200, 200, 200, 200},
	}
	cells := []struct{ repo, op string }{{"alice/pub", "download"}, {"alice/pub", "upload"}, {"alice/priv", "download"}, {"alice/priv", "upload"}}
	for caller, codes := range want {
		for i, c := range cells {
			t.Run(fmt.Sprintf("%s/%s/%s", caller, c.repo, c.op), func(t *testing.T) {
				if tok, ok := tokens[caller]; ok {
					if got, ans := batchAs(t, srv, c.repo, tok, nil, c.op, oid, 1); got != codes[i] {
						t.Fatalf("batch: %d %v, want %d", got, ans, codes[i])
					}
					return
				}
				h, r := sshAuthenticate(t, env, srv, keys[caller], c.repo, c.op)
				if h == nil {
					msg := map[int]string{403: "ERROR: permission denied", 404: "ERROR: repository not found"}[codes[i]]
					if msg == "" || !strings.Contains(r.Stderr, msg) {
						t.Fatalf("git-lfs-authenticate refused (%s), want status %d", r, codes[i])
					}
					return
				}
				if got, ans := batchAs(t, srv, c.repo, "", h, c.op, oid, 1); got != codes[i] {
					t.Fatalf("batch with the SSH header: %d %v, want %d", got, ans, codes[i])
				}
			})
		}
	}
	// A header is for its repository and operation: the write
	// collaborator's header for downloading priv uploads nothing, and its
	// header for priv does nothing on another repository.
	h, _ := sshAuthenticate(t, env, srv, keys["write collaborator key"], "alice/priv", "download")
	if got, _ := batchAs(t, srv, "alice/priv", "", h, "upload", oid, 1); got != 403 {
		t.Errorf("upload with a download header: %d, want 403", got)
	}
	h, _ = sshAuthenticate(t, env, srv, keys["write collaborator key"], "alice/priv", "upload")
	if got, _ := batchAs(t, srv, "alice/other", "", h, "upload", oid, 1); got != 404 {
		t.Errorf("upload to another repository with priv's header: %d, want 404", got)
	}
	if got, _ := batchAs(t, srv, "alice/priv", "", map[string]string{"Authorization": "RemoteAuth forged.header"}, "download", oid, 1); got != 401 {
		t.Errorf("a forged RemoteAuth header: %d, want 401", got)
	}
}
