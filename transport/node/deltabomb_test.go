package node_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/attack"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/service/admission"
)

// bombPush is a receive-pack request creating refs/heads/bomb at the bomb's
// blob (its delta is never resolved, so its result needs no name).
func bombPush(baseSize, copies int) []byte {
	pack, blob := attack.DeltaBomb(baseSize, copies)
	cmd := fmt.Sprintf("%s %s refs/heads/bomb", object.ID{}, blob)
	return attack.ReceivePackRequest("report-status", []string{cmd}, pack)
}

// sshReceivePack sends body to repo's receive-pack over SSH as key's owner
// and returns everything the server answered (advertisement, report).
func sshReceivePack(t *testing.T, env *gitenv.Env, key gitenv.Key, addr, repo string, body []byte) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", gitenv.SSHCommand(key)+` -p "$1" git@"$2" "git-receive-pack '$3'"`, "sh", port, host, repo)
	cmd.Env = env.Environ()
	cmd.Stdin = bytes.NewReader(body)
	r := gitrun.Exec(cmd)
	if !r.OK() {
		t.Fatalf("raw receive-pack over SSH: %s", r)
	}
	return r.Stdout
}

// TestDeltaBombRefused: with default settings, a pack of a 16 MiB zero
// blob and a REF_DELTA copying it 16 times (256 MiB declared in a 17 KB
// push) is refused over HTTP and SSH from the size the delta declares,
// naming RGIT_MAX_OBJECT_SIZE, and changes nothing: no ref, no stored
// pack.
func TestDeltaBombRefused(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := gitenv.New(t)
	tok := srv.AddToken(t, "alice")
	key := env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", key)
	body := bombPush(16<<20, 16)
	const want = "unpack object too large (limit 104857600 bytes, set RGIT_MAX_OBJECT_SIZE); store larger files with Git LFS, which this server supports: `git lfs migrate import --above=104857600` moves them out of your commits, then push again"
	for _, tr := range []string{"http", "ssh"} {
		t.Run(tr, func(t *testing.T) {
			repo := "alice/bomb-" + tr
			srv.CreateRepo(t, repo)
			var answer string
			if tr == "http" {
				var status int
				status, answer = postReceivePack(t, srv.HTTPAddr, tok, repo, body, false)
				if status != http.StatusOK {
					t.Fatalf("status %d: %s", status, answer)
				}
			} else {
				answer = sshReceivePack(t, env, key, srv.SSHAddr, repo, body)
			}
			if !strings.Contains(answer, want) || !strings.Contains(answer, "ng refs/heads/bomb") {
				t.Fatalf("delta bomb (%d bytes pushed): answer %q, want %q and the ref refused", len(body), answer, want)
			}
			if refs := env.Run(t, "", "ls-remote", srv.HTTPURL(tok, repo)); refs != "" {
				t.Errorf("refused push changed refs:\n%s", refs)
			}
			if n := storedPacks(t, srv, repo); n != 0 {
				t.Errorf("refused push stored %d packs", n)
			}
		})
	}
}

// TestObjectSizeLimitBoundary: with a lowered RGIT_MAX_OBJECT_SIZE, git
// pushes a file of the limit less 100 bytes; the next version, one byte
// over the limit, reaches the server as a delta against the first and is
// refused from the result size the delta declares, naming the limit; a
// version of exactly the limit is accepted, and clones back intact.
func TestObjectSizeLimitBoundary(t *testing.T) {
	const limit = 1 << 20
	srv := gitenv.StartServer(t, gitenv.FileStore(t), fmt.Sprintf("RGIT_MAX_OBJECT_SIZE=%d", limit))
	env := gitenv.New(t)
	tok := srv.AddToken(t, "alice")
	key := env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", key)
	for _, tr := range []string{"http", "ssh"} {
		t.Run(tr, func(t *testing.T) {
			repo := "alice/limit-" + tr
			srv.CreateRepo(t, repo)
			url, extra := srv.HTTPURL(tok, repo), []string(nil)
			if tr == "ssh" {
				url, extra = srv.SSHURL(repo), gitenv.SSHEnv(key)
			}
			work := env.Scratch(t)
			content := incompressible(limit-100, 7)
			under := env.Commit(t, work, "under", map[string]string{"f": content})
			env.RunEnv(t, work, extra, "push", "-q", url, "main")

			env.Commit(t, work, "over", map[string]string{"f": content + incompressible(101, 8)})
			r := env.TryEnv(work, extra, "push", url, "main")
			want := fmt.Sprintf("remote unpack failed: object too large (limit %d bytes, set RGIT_MAX_OBJECT_SIZE); store larger files with Git LFS, which this server supports: `git lfs migrate import --above=%d` moves them out of your commits, then push again", limit, limit)
			if r.OK() || !strings.Contains(r.Stderr, want) {
				t.Fatalf("push of a file one byte over the limit: %s\nwant %q", r, want)
			}
			if !strings.Contains(srv.LogTail(400), "delta result exceeds max size") {
				t.Errorf("the refused version did not arrive as a delta (server log):\n%s", srv.LogTail(20))
			}
			if got := strings.Fields(env.RunEnv(t, "", extra, "ls-remote", url, "refs/heads/main")); len(got) == 0 || got[0] != under {
				t.Fatalf("main after the refused push: %v, want %s", got, under)
			}

			env.Run(t, work, "reset", "-q", "--hard", under)
			at := env.Commit(t, work, "at", map[string]string{"f": content + incompressible(100, 8)})
			env.RunEnv(t, work, extra, "push", "-q", url, "main")
			clone := filepath.Join(t.TempDir(), "c")
			env.RunEnv(t, "", extra, "clone", "-q", url, clone)
			env.Fsck(t, clone)
			if head := env.Run(t, clone, "rev-parse", "HEAD"); strings.TrimSpace(head) != at {
				t.Fatalf("clone HEAD %s, want %s", head, at)
			}
			if b, err := os.ReadFile(filepath.Join(clone, "f")); err != nil || len(b) != limit {
				t.Fatalf("cloned file: %d bytes, %v; want %d", len(b), err, limit)
			}
		})
	}
}

// TestPushDeclaredSizesAdmitted: a delta within the object size limit
// that declares more than a push's estimate (32 MiB from a 4 MiB blob)
// asks memory admission first: with the budget held by other work the
// push is refused as busy before anything is applied, and changes
// nothing; once the other work is over the same push is accepted.
func TestPushDeclaredSizesAdmitted(t *testing.T) {
	adm := admission.New(admission.Limits{Memory: 128 << 20, Work: 64 << 20, MaxActive: 100}, nil)
	srv := gitenv.StartServerOpts(t, gitenv.FileStore(t), []node.Option{node.WithAdmission(adm)})
	env := gitenv.New(t)
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/declared")
	body := bombPush(4<<20, 8)

	hold, ok := adm.Reserve(admission.Fetch, 40<<20)
	if !ok {
		t.Fatal("an idle node refused work")
	}
	status, answer := postReceivePack(t, srv.HTTPAddr, tok, "alice/declared", body, false)
	if status != http.StatusOK || !strings.Contains(answer, "unpack server busy") || !strings.Contains(answer, "ng refs/heads/bomb") {
		t.Fatalf("push declaring 36 MiB with 24 MiB of the budget free: status %d, answer %q", status, answer)
	}
	if refs := env.Run(t, "", "ls-remote", srv.HTTPURL(tok, "alice/declared")); refs != "" {
		t.Errorf("refused push changed refs:\n%s", refs)
	}
	if n := storedPacks(t, srv, "alice/declared"); n != 0 {
		t.Errorf("refused push stored %d packs", n)
	}

	hold()
	status, answer = postReceivePack(t, srv.HTTPAddr, tok, "alice/declared", body, false)
	if status != http.StatusOK || !strings.Contains(answer, "unpack ok") || !strings.Contains(answer, "ok refs/heads/bomb") {
		t.Fatalf("the same push on an idle node: status %d, answer %q", status, answer)
	}
}
