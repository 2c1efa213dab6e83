package api

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/testkit/gitrun"
)

// TestDiffMatchesGit: the files and statuses of a commit's diff are git's
// (git diff-tree -r -M --name-status) through nested directories, a file
// that became a directory, deletions, a rename and a mode change.
func TestDiffMatchesGit(t *testing.T) {
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	wt := g.Dir
	commit := func(msg string, files map[string]string) string {
		for name, content := range files {
			g.Write(name, content)
		}
		g.Run("add", "-A")
		g.Run("commit", "-q", "-m", msg)
		return g.Run("rev-parse", "HEAD")
	}
	commit("one", map[string]string{
		"a": "file a\n", "a-b": "x\n", "d/e/f.txt": "deep\n", "d/g.txt": "g\n", "gone/x.txt": "bye\n",
		"moved.txt": strings.Repeat("a line that keeps its content\n", 20), "run.sh": "echo\n",
	})
	os.Remove(filepath.Join(wt, "a"))
	os.RemoveAll(filepath.Join(wt, "gone"))
	g.Run("mv", "moved.txt", "d/renamed.txt")
	if err := os.Chmod(filepath.Join(wt, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	head := commit("two", map[string]string{"a/inner.txt": "now a dir\n", "d/e/f.txt": "deeper\n", "new.txt": "n\n"})
	g.Run("repack", "-adq")
	packs, _ := filepath.Glob(filepath.Join(wt, ".git", "objects", "pack", "*.pack"))
	p, err := pack.Open(packs[0], strings.TrimSuffix(packs[0], ".pack")+".idx")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rd := newReader(context.Background(), pack.NewSet(p), Limits{})
	got, err := rd.commitWithDiff(object.MustID(head))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range got.Files {
		st := map[string]string{"added": "A", "deleted": "D", "modified": "M", "renamed": "R"}[f.Status]
		if f.OldPath != "" {
			lines = append(lines, st+"\t"+f.OldPath+"\t"+f.Path)
		} else {
			lines = append(lines, st+"\t"+f.Path)
		}
	}
	var want []string
	for _, l := range strings.Split(g.Run("diff-tree", "-r", "-M", "--name-status", "HEAD~1", "HEAD"), "\n") {
		if strings.HasPrefix(l, "R") {
			l = "R" + l[strings.IndexByte(l, '\t'):] // drop the similarity score
		}
		want = append(want, l)
	}
	sort.Strings(lines)
	sort.Strings(want)
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("files:\n%s\ngit diff-tree:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(got.Diff, "-deep\n+deeper\n") || !strings.Contains(got.Diff, "old mode 100644\nnew mode 100755") {
		t.Errorf("diff:\n%s", got.Diff)
	}
}
