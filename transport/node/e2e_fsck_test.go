package node_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// TestFsckPolicy pushes, with real git, a history as old public projects
// have it (a zero-padded tree mode, a commit with a bad time zone): the
// default server accepts it and logs the findings, RGIT_FSCK_STRICT=1
// refuses it. A tree with a ".GIT" entry is refused by both.
func TestFsckPolicy(t *testing.T) {
	env := gitenv.New(t)
	src := env.Scratch(t)
	write := func(kind string, body []byte) string {
		p := filepath.Join(t.TempDir(), "obj")
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		return env.Run(t, src, "hash-object", "-w", "--literally", "-t", kind, p)
	}
	raw := func(id string) string {
		b, err := hex.DecodeString(id)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	blob := write("blob", []byte("hello\n"))
	inner := write("tree", []byte("100644 a\x00"+raw(blob)))
	padded := write("tree", []byte("040000 d\x00"+raw(inner)))
	commit := func(tree, zone string) string {
		return write("commit", []byte("tree "+tree+"\nauthor A U Thor <a@example.com> 1234567890 "+zone+"\n"+
			"committer C O Mitter <c@example.com> 1234567890 +0000\n\nmsg\n"))
	}
	old := commit(padded, "+000") // a three-digit zone: badTimezone
	env.Run(t, src, "update-ref", "refs/heads/old", old)
	evil := write("tree", []byte("40000 .GIT\x00"+raw(inner)))
	env.Run(t, src, "update-ref", "refs/heads/evil", commit(evil, "+0000"))

	for _, mode := range []struct {
		name   string
		vars   []string
		accept bool
	}{{"default", nil, true}, {"strict", []string{"RGIT_FSCK_STRICT=1"}, false}} {
		t.Run(mode.name, func(t *testing.T) {
			srv := gitenv.StartServer(t, gitenv.FileStore(t), mode.vars...)
			token := srv.AddToken(t, "alice")
			srv.CreateRepo(t, "alice/old")
			url := srv.HTTPURL(token, "alice/old")

			r := env.Try(src, "push", url, "old:refs/heads/main")
			if mode.accept {
				if !r.OK() {
					t.Fatalf("push of a cosmetically flawed history refused by default: %s", r)
				}
				logs := srv.LogTail(200)
				for check, id := range map[string]string{"zeroPaddedFilemode": padded, "badTimezone": old} {
					if !logLineHas(logs, "cosmetic fsck finding", check, id) {
						t.Errorf("no log line names %s and object %s:\n%s", check, id, logs)
					}
				}
				if got := env.Run(t, src, "ls-remote", url, "refs/heads/main"); !strings.HasPrefix(got, old) {
					t.Fatalf("ls-remote after accepted push: %q", got)
				}
			} else {
				if r.OK() || !strings.Contains(r.Stderr, "zeroPaddedFilemode") && !strings.Contains(r.Stderr, "badTimezone") {
					t.Fatalf("strict push: want a refusal naming the check, got %s", r)
				}
				if got := env.Run(t, src, "ls-remote", url); got != "" {
					t.Fatalf("strict refusal changed refs: %q", got)
				}
			}

			r = env.Try(src, "push", url, "evil:refs/heads/evil")
			if r.OK() || !strings.Contains(r.Stderr, "hasDotgit") {
				t.Fatalf("push of a .GIT tree: want refusal naming hasDotgit, got %s", r)
			}
		})
	}
}

// logLineHas reports whether one line of logs contains every word.
func logLineHas(logs string, words ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}
