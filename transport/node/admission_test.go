package node_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/service/admission"
)

// TestAdmissionRefusesWhenSpent: with the pack-work budget spent by work
// already admitted, a clone over SSH gets "ERR server busy" (once its
// negotiation decided that a pack follows), a clone and a push over HTTP
// get 503 with Retry-After, and nothing is changed; the ref advertisement
// (info/refs) and a v2 ls-refs still answer. Once the admitted work ends,
// the same operations succeed.
func TestAdmissionRefusesWhenSpent(t *testing.T) {
	env := gitenv.New(t)
	adm := admission.New(admission.Limits{Memory: 100 << 20, Work: 60 << 20, MaxActive: 100}, nil)
	srv := gitenv.StartServerOpts(t, gitenv.FileStore(t), []node.Option{node.WithAdmission(adm)})
	srv.CreateRepo(t, "alice/busy")
	tok := srv.AddToken(t, "alice")
	key := env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", key)
	work := env.Scratch(t)
	first := env.Commit(t, work, "one", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/busy"), "main")

	// A clone in flight holds the whole budget.
	hold, ok := adm.Reserve(admission.Fetch, 60<<20)
	if !ok {
		t.Fatal("an idle node refused work")
	}
	sshClone := env.TryEnv("", gitenv.SSHEnv(key), "clone", "-q", srv.SSHURL("alice/busy"), filepath.Join(t.TempDir(), "s"))
	if sshClone.Err == nil || !strings.Contains(sshClone.Stderr, "server busy") {
		t.Errorf("SSH clone with the budget spent: %v\n%s", sshClone.Err, sshClone.Stderr)
	}
	t.Logf("SSH clone refused: %s", strings.TrimSpace(sshClone.Stderr))
	httpClone := env.Try("", "-c", "protocol.version=2", "clone", "-q", srv.HTTPURL(tok, "alice/busy"), filepath.Join(t.TempDir(), "h"))
	if httpClone.Err == nil || !strings.Contains(httpClone.Stderr, "503") {
		t.Errorf("HTTP v2 clone with the budget spent: %v\n%s", httpClone.Err, httpClone.Stderr)
	}
	t.Logf("HTTP clone refused: %s", strings.TrimSpace(httpClone.Stderr))
	env.Commit(t, work, "two", map[string]string{"b.txt": "b\n"})
	push := env.Try(work, "push", "-q", srv.HTTPURL(tok, "alice/busy"), "main")
	if push.Err == nil || !strings.Contains(push.Stderr, "503") {
		t.Errorf("HTTP push with the budget spent: %v\n%s", push.Err, push.Stderr)
	}
	if got := strings.Fields(env.Run(t, "", "ls-remote", srv.HTTPURL(tok, "alice/busy"), "refs/heads/main")); len(got) == 0 || got[0] != first {
		t.Errorf("main after the refused push: %v, want %s (and ls-refs must still answer)", got, first)
	}
	// The raw answer to a fetch whose pack would follow: 503 with
	// Retry-After.
	body := fmt.Sprintf("%04x%s0000%04x%s", 4+len("want "+first+"\n"), "want "+first+"\n", 4+len("done\n"), "done\n")
	req, _ := http.NewRequest("POST", "http://"+srv.HTTPAddr+"/alice/busy.git/git-upload-pack", strings.NewReader(body))
	req.SetBasicAuth("x", tok)
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("upload-pack POST with the budget spent: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	hold()
	env.RunEnv(t, "", gitenv.SSHEnv(key), "clone", "-q", srv.SSHURL("alice/busy"), filepath.Join(t.TempDir(), "s2"))
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/busy"), "main")
	clone := filepath.Join(t.TempDir(), "h2")
	env.Run(t, "", "clone", "-q", srv.HTTPURL(tok, "alice/busy"), clone)
	env.Fsck(t, clone)
}
