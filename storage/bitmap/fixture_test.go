package bitmap

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/testkit/gitrun"
)

// gitRepo is a throwaway repository driven by the git CLI with a fixed
// identity and clock, so object ids are the same on every run.
type gitRepo struct {
	t    *testing.T
	dir  string
	tick int
	g    *gitrun.Repo
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("t", "t@x", "")})
	return &gitRepo{t: t, dir: g.Dir, g: g, tick: 1} // the first command is dated 1700000120
}

// git runs git with the clock a minute on from the previous call.
func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	r.tick++
	r.g.At(1700000000 + int64(r.tick)*60)
	return strings.TrimSpace(r.g.Run(args...))
}

func (r *gitRepo) id(rev string) object.ID {
	r.t.Helper()
	id, err := object.ParseID(r.git("rev-parse", rev))
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

func (r *gitRepo) write(name, content string) {
	r.t.Helper()
	r.g.Write(name, content)
}

// commit writes a few files (one shared, one per commit, one in a deep
// directory) and commits everything.
func (r *gitRepo) commit(msg string) {
	r.t.Helper()
	r.write("README-"+msg[:1], "readme "+msg+"\n") // shared within a branch, no merge conflicts
	r.write("src/"+msg+".go", "package x // "+msg+"\n")
	r.write("deep/a/b/c/"+msg, msg+"\n")
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
}

// refs returns every ref's id (tags unpeeled).
func (r *gitRepo) refs() []object.ID {
	var ids []object.ID
	for _, l := range strings.Fields(r.git("for-each-ref", "--format=%(objectname)")) {
		id, err := object.ParseID(l)
		if err != nil {
			r.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// packs opens the repository's packs, newest first.
func (r *gitRepo) packs() []*pack.Pack {
	r.t.Helper()
	paths, _ := filepath.Glob(filepath.Join(r.dir, ".git/objects/pack/*.pack"))
	slices.SortFunc(paths, func(a, b string) int {
		sa, _ := os.Stat(a)
		sb, _ := os.Stat(b)
		return sb.ModTime().Compare(sa.ModTime())
	})
	var ps []*pack.Pack
	for _, p := range paths {
		pk, err := pack.Open(p, strings.TrimSuffix(p, ".pack")+".idx")
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(func() { pk.Close() })
		ps = append(ps, pk)
	}
	return ps
}

// revList is `git rev-list --objects wants --not haves`, as a sorted set.
func (r *gitRepo) revList(wants, haves []object.ID) []object.ID {
	args := []string{"rev-list", "--objects"}
	for _, w := range wants {
		args = append(args, w.String())
	}
	if len(haves) > 0 {
		args = append(args, "--not")
		for _, h := range haves {
			args = append(args, h.String())
		}
	}
	var ids []object.ID
	for _, l := range strings.Split(r.git(args...), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			id, err := object.ParseID(f[0])
			if err != nil {
				r.t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	return sortedIDs(ids)
}

func sortedIDs(ids []object.ID) []object.ID {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b object.ID) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(out)
}

// history builds the standard test history: main with a merged topic
// branch (a rename and a delete), an unmerged side branch, annotated tags
// (one of them a tag of a tag, one on a blob) and a lightweight tag, all
// in one pack.
func history(t *testing.T) *gitRepo {
	r := newGitRepo(t)
	for i := range 8 {
		r.commit("m" + strconv.Itoa(i))
	}
	r.git("tag", "-a", "-m", "v1", "v1", "main~3")
	r.git("tag", "-a", "-m", "v1 again", "v1b", "v1")
	r.git("tag", "light", "main~5")
	r.git("checkout", "-q", "-b", "topic", "main~4")
	r.commit("t0")
	r.git("mv", "src/m1.go", "src/renamed.go")
	r.git("rm", "-q", "deep/a/b/c/m0")
	r.git("commit", "-q", "-m", "rename and delete")
	r.commit("t1")
	r.git("checkout", "-q", "main")
	r.git("merge", "-q", "--no-ff", "-m", "merge topic", "topic")
	r.commit("m8")
	r.git("checkout", "-q", "-b", "side", "main~2")
	r.commit("s0")
	r.commit("s1")
	r.git("checkout", "-q", "main")
	blob := r.git("rev-parse", "main:README-m")
	r.git("tag", "-a", "-m", "blob tag", "blobtag", blob)
	r.git("repack", "-adq")
	return r
}

func TestHistoryFixture(t *testing.T) {
	r := history(t)
	if n := len(r.packs()); n != 1 {
		t.Fatalf("%d packs after repack, want 1", n)
	}
	if got := len(r.refs()); got != 7 {
		t.Fatalf("%d refs, want 7", got)
	}
}
