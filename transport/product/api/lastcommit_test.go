package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/testkit/gitrun"
)

// lastCommitRepo is a history with merges: a clean merge whose sides
// changed different files, a conflicted merge resolved to new content,
// a merge whose side alone changed a file, a merge of the same change
// made on both sides, a mode change, a file that became a directory and
// a file deleted and added back. Every commit is a minute after the
// one before.
func lastCommitRepo(t *testing.T) (*gitrun.Repo, object.ID) {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	at := int64(1700000000)
	commit := func(msg string, files map[string]string) {
		at += 60
		g.At(at)
		for name, content := range files {
			g.Write(name, content)
		}
		g.Run("add", "-A")
		g.Run("commit", "-q", "--allow-empty", "-m", msg)
	}
	merge := func(branch string) {
		at += 60
		g.At(at)
		g.Run("merge", "-q", "--no-ff", "-m", "merge "+branch, branch)
	}
	commit("root", map[string]string{"README.md": "# r\n", "a.txt": "a0\n", "dir/x.txt": "x0\n", "dir/y.txt": "y0\n",
		"dir/deep/z.txt": "z0\n", "mode.sh": "echo\n", "flip": "a file\n", "gone.txt": "back\n", "c.txt": "c0\n", "d.txt": "d0\n"})
	commit("a once", map[string]string{"a.txt": "a1\n"})
	g.Run("checkout", "-q", "-b", "feature")
	commit("feature x", map[string]string{"dir/x.txt": "x1\n"})
	commit("feature b", map[string]string{"b.txt": "b\n"})
	g.Run("checkout", "-q", "main")
	commit("main y", map[string]string{"dir/y.txt": "y1\n"})
	if err := os.Chmod(filepath.Join(g.Dir, "mode.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	commit("mode", nil)
	merge("feature")
	// A conflict resolved to content neither side had: the merge itself
	// changed a.txt.
	g.Run("checkout", "-q", "-b", "side")
	commit("side a", map[string]string{"a.txt": "side\n"})
	g.Run("checkout", "-q", "main")
	commit("main a", map[string]string{"a.txt": "main\n"})
	at += 60
	g.At(at)
	g.Try(nil, "merge", "-q", "--no-ff", "side")
	g.Write("a.txt", "resolved\n")
	g.Run("add", "-A")
	g.Run("commit", "-q", "-m", "merge side, resolved")
	// Only the side changed c.txt: its commit is on the side.
	g.Run("checkout", "-q", "-b", "cside")
	commit("cside c", map[string]string{"c.txt": "c1\n"})
	g.Run("checkout", "-q", "main")
	commit("main other", map[string]string{"dir/deep/z.txt": "z1\n"})
	merge("cside")
	// The same change on both sides: git follows the first parent.
	g.Run("checkout", "-q", "-b", "dside")
	commit("dside d", map[string]string{"d.txt": "same\n"})
	g.Run("checkout", "-q", "main")
	commit("main d", map[string]string{"d.txt": "same\n"})
	merge("dside")
	g.Run("rm", "-q", "flip")
	commit("flip becomes a directory", map[string]string{"flip/inner.txt": "in\n"})
	g.Run("rm", "-q", "gone.txt")
	commit("remove gone", nil)
	commit("gone is back", map[string]string{"gone.txt": "back\n"})
	commit("unrelated", map[string]string{"dir/y.txt": "y2\n"})
	return g, object.MustID(g.Run("rev-parse", "HEAD"))
}

// gitLast is `git log -1 --format=%H -- path` at head.
func gitLast(g *gitrun.Repo, head object.ID, path string) string {
	return g.Run("log", "-1", "--format=%H", head.String(), "--", path)
}

// TestLastCommitMatchesGit: every entry's commit, at the root and in
// subdirectories, is the one `git log -1 -- <path>` names, through every
// kind of merge the fixture has; every commit named is described.
func TestLastCommitMatchesGit(t *testing.T) {
	g, head := lastCommitRepo(t)
	objs := (&bombRepo{g: g}).objects(t)
	for _, dir := range []string{"", "dir", "dir/deep", "flip"} {
		var sub []string
		if dir != "" {
			sub = strings.Split(dir, "/")
		}
		rd := newReader(context.Background(), objs, Limits{})
		a, err := rd.lastCommits(head, sub, 0)
		if err != nil {
			t.Fatalf("%q: %v", dir, err)
		}
		if a.Truncated || a.Path != dir || a.Commit != head.String() {
			t.Errorf("%q: truncated %v (%s), path %q, commit %s", dir, a.Truncated, a.TruncatedReason, a.Path, a.Commit)
		}
		lsTree := g.Run("ls-tree", "--name-only", head.String()+":"+dir)
		if got := entryNames(a.Entries); got != strings.ReplaceAll(lsTree, "\n", " ") {
			t.Errorf("%q: entries %s, git ls-tree %s", dir, got, lsTree)
		}
		for _, e := range a.Entries {
			path := strings.TrimPrefix(dir+"/"+e.Name, "/")
			if want := gitLast(g, head, path); e.Commit != want {
				t.Errorf("%s: %s, git log -1: %s (%s)", path, e.Commit, want, g.Run("log", "-1", "--format=%s", want))
			}
			info, ok := a.Commits[e.Commit]
			if want := g.Run("log", "-1", "--format=%s", e.Commit); !ok || info.Subject != want {
				t.Errorf("%s: commit %s described as %+v, want subject %q", path, e.Commit, info, want)
			}
		}
	}
}

func entryNames(es []lastCommitName) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return strings.Join(out, " ")
}

// TestLastCommitBudget: past MaxLastCommitScan commits, or past the time
// budget, the answer lists every entry, names the commits it found
// (git's), leaves the rest without one and says which limit cut it.
func TestLastCommitBudget(t *testing.T) {
	g, head := lastCommitRepo(t)
	objs := (&bombRepo{g: g}).objects(t)
	rd := newReader(context.Background(), objs, Limits{MaxLastCommitScan: 3})
	a, err := rd.lastCommits(head, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Truncated || a.timedOut || a.Examined != 3 || !strings.Contains(a.TruncatedReason, "set "+SettingMaxLastCommitScan) {
		t.Fatalf("truncated %v (%q), timed out %v, examined %d", a.Truncated, a.TruncatedReason, a.timedOut, a.Examined)
	}
	found := 0
	for _, e := range a.Entries {
		if e.Commit == "" {
			continue
		}
		found++
		if want := gitLast(g, head, e.Name); e.Commit != want {
			t.Errorf("%s: %s, git: %s", e.Name, e.Commit, want)
		}
	}
	if found == 0 || found == len(a.Entries) {
		t.Errorf("%d of %d entries found within 3 commits, want some but not all", found, len(a.Entries))
	}

	rd = newReader(context.Background(), objs, Limits{LastCommitTimeout: time.Nanosecond})
	if a, err = rd.lastCommits(head, nil, 0); err != nil {
		t.Fatal(err)
	}
	if !a.Truncated || !a.timedOut || !strings.Contains(a.TruncatedReason, "set "+SettingLastCommitTimeout) || len(a.Entries) == 0 {
		t.Errorf("time budget: truncated %v (%q), timed out %v, %d entries", a.Truncated, a.TruncatedReason, a.timedOut, len(a.Entries))
	}
}

// TestLastCommitWideDeep: a directory of 1,000 entries that every one of
// 300 commits changes, one entry untouched since the first (so the walk
// goes to the root), read with a 1 MiB object cache: the walk keeps to
// its commit and entry budgets, the cache to its bytes (the trees it
// reads are 10 MB), and a warm cache changes no answer.
func TestLastCommitWideDeep(t *testing.T) {
	const width, depth = 1000, 300
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	var s strings.Builder
	for c := range depth {
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter T <t@x> %d +0000\ndata 2\nc\n", 1700000000+60*c)
		if c == 0 {
			s.WriteString("M 100644 inline wide/old.txt\ndata 4\nold\n")
			for i := range width {
				fmt.Fprintf(&s, "M 100644 inline wide/f%04d\ndata 2\n0\n", i)
			}
			continue
		}
		content := strconv.Itoa(c)
		fmt.Fprintf(&s, "M 100644 inline wide/f%04d\ndata %d\n%s\n", c*7919%width, len(content), content)
	}
	g.Output([]byte(s.String()), "fast-import", "--quiet")
	g.Run("repack", "-adq")
	packs, _ := filepath.Glob(filepath.Join(g.Dir, ".git", "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("%d packs", len(packs))
	}
	bases := pack.NewBaseCache(1<<20, 0)
	p, err := pack.OpenWith(packs[0], strings.TrimSuffix(packs[0], ".pack")+".idx", pack.OpenOptions{Bases: bases})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	objs := pack.NewSet(p)
	head := object.MustID(g.Run("rev-parse", "main"))
	wide := []string{"wide"}

	var first lastCommitAnswer
	memo := NewWalkMemo(WalkMemoBytes)
	for round := range 2 {
		// The budgets under test are commits and entries; the time budget
		// (2 s by default) is TestLastCommitBudget's, and a loaded machine
		// (CI's -race stage) could reach it here.
		rd := newReader(context.Background(), objs, Limits{LastCommitTimeout: time.Minute})
		rd.memo = memo
		a, err := rd.lastCommits(head, wide, 0)
		if err != nil {
			t.Fatal(err)
		}
		if a.Truncated || a.Examined != depth || len(a.Entries) != width+1 {
			t.Fatalf("round %d: truncated %v (%s), examined %d, %d entries", round, a.Truncated, a.TruncatedReason, a.Examined, len(a.Entries))
		}
		if n := bases.Bytes(); n > 1<<20 {
			t.Errorf("round %d: the cache holds %d bytes, over its 1 MiB", round, n)
		}
		if round == 0 {
			first = a
			continue
		}
		if fmt.Sprint(a.Entries) != fmt.Sprint(first.Entries) {
			t.Error("a warm cache changed the answer")
		}
	}
	byName := map[string]string{}
	for _, e := range first.Entries {
		byName[e.Name] = e.Commit
	}
	for _, name := range []string{"old.txt", "f0000", fmt.Sprintf("f%04d", (depth-1)*7919%width)} {
		if want := gitLast(g, head, "wide/"+name); byName[name] != want {
			t.Errorf("%s: %s, git: %s", name, byName[name], want)
		}
	}

	for _, c := range []struct {
		lim     Limits
		setting string
	}{
		{Limits{MaxLastCommitScan: 50, LastCommitTimeout: time.Minute}, SettingMaxLastCommitScan},
		{Limits{MaxEntries: 20 * width, LastCommitTimeout: time.Minute}, SettingMaxEntries},
	} {
		rd := newReader(context.Background(), objs, c.lim)
		a, err := rd.lastCommits(head, wide, 0)
		if err != nil {
			t.Fatal(err)
		}
		lim := rd.w.lim
		if !a.Truncated || !strings.Contains(a.TruncatedReason, c.setting) || a.Examined > lim.MaxLastCommitScan ||
			rd.w.visited > int64(lim.MaxEntries)+width+1 {
			t.Errorf("%s: truncated %v (%s), examined %d, visited %d entries", c.setting, a.Truncated, a.TruncatedReason, a.Examined, rd.w.visited)
		}
	}
}

// TestLastCommitServed: the endpoint answers through the front as other
// id answers do (immutable, one cache key whatever timeout_ms asked); an
// answer the time budget cut is never stored; a bad timeout_ms is 400.
func TestLastCommitServed(t *testing.T) {
	r := newLocalRepo(t)
	l := newLocal(t, r.open(t))
	srv := newTestHandler(t, nil, l)
	base := "/api/alice/site/lastcommit/" + r.main.String()
	code, h, body := get(t, srv, base+"?timeout_ms=500")
	if code != http.StatusOK || h.Get("Cache-Control") != ccImmutable || h.Get("ETag") == "" ||
		!strings.Contains(body, `{"name":"README.md","commit":"`+r.main.String()+`"}`) || !strings.Contains(body, `"truncated":false`) {
		t.Errorf("whole answer: %d %v\n%s", code, h, body)
	}
	q, err := ParseRequest(base+"/dir", url.Values{"timeout_ms": {"500"}})
	if err != nil || q.CacheSuffix() != "lastcommit/"+r.main.String()+"/dir" || !strings.HasSuffix(q.Path(), "?timeout_ms=500") {
		t.Errorf("request %+v (%v): cache suffix %q, path %q", q, err, q.CacheSuffix(), q.Path())
	}
	if code, _, body := get(t, srv, base+"?timeout_ms=-1"); code != http.StatusBadRequest {
		t.Errorf("timeout_ms=-1: %d %s", code, body)
	}
	l.Limits.LastCommitTimeout = time.Nanosecond
	code, h, body = get(t, srv, base)
	if code != http.StatusOK || h.Get("Cache-Control") != "no-store" || h.Get("ETag") != "" || !strings.Contains(body, `"truncated":true`) {
		t.Errorf("answer cut by time: %d %v\n%s", code, h, body)
	}
}

// BenchmarkLastCommit: the root of a 2000-commit history (20
// directories of 10 files, one file changed per commit, and a file
// untouched since the first commit, which sends the walk to the root)
// answered by one walk, against the reference measured in the same run:
// `git log -1 -- <entry>` for each entry, as a page without a combined
// walk would have to ask.
func BenchmarkLastCommit(b *testing.B) {
	g := gitrun.Scratch(b, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	var s strings.Builder
	file := func(i int) string { return fmt.Sprintf("d%02d/f%d.txt", i%20, i/20) }
	for c := range 2000 {
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter T <t@x> %d +0000\ndata 2\nc\n", 1700000000+60*c)
		if c == 0 {
			s.WriteString("M 100644 inline old.txt\ndata 4\nold\n")
			for i := range 200 {
				fmt.Fprintf(&s, "M 100644 inline %s\ndata 2\n0\n", file(i))
			}
			continue
		}
		content := strconv.Itoa(c)
		fmt.Fprintf(&s, "M 100644 inline %s\ndata %d\n%s\n", file(c*7919%200), len(content), content)
	}
	g.Output([]byte(s.String()), "fast-import", "--quiet")
	head := object.MustID(g.Run("rev-parse", "main"))
	objs := (&bombRepo{g: g}).objects(b)
	entries := strings.Fields(g.Run("ls-tree", "--name-only", "main"))
	b.Run("rgit-one-walk", func(b *testing.B) {
		for b.Loop() {
			a, err := newReader(context.Background(), objs, Limits{}).lastCommits(head, nil, 0)
			if err != nil || a.Truncated || a.Entries[len(a.Entries)-1].Commit == "" {
				b.Fatalf("%v truncated %v", err, a.Truncated)
			}
		}
	})
	b.Run("git-log-per-entry", func(b *testing.B) {
		for b.Loop() {
			for _, e := range entries {
				g.Run("log", "-1", "--format=%H", "main", "--", e)
			}
		}
	})
}
