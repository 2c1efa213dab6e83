package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/testkit/gitrun"
)

// TestBudgetDecisions: the archive decision and the size sums it rests
// on, and the entry budget every walk counts against.
func TestBudgetDecisions(t *testing.T) {
	lim := Limits{MaxEntries: 100, MaxArchiveBytes: 1000}.withDefaults()
	for _, c := range []struct {
		name    string
		size    treeSize
		setting string // "" admits
	}{
		{"empty", treeSize{}, ""},
		{"at the limits", treeSize{100, 1000}, ""},
		{"one entry over", treeSize{101, 0}, SettingMaxEntries},
		{"one byte over", treeSize{1, 1001}, SettingMaxArchiveBytes},
		{"both over: entries first", treeSize{101, 1001}, SettingMaxEntries},
	} {
		err := archiveVerdict(c.size, lim)
		le, over := asLimit(err)
		switch {
		case c.setting == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.setting != "" && (!over || le.Setting != c.setting || !strings.Contains(err.Error(), "set "+c.setting)):
			t.Errorf("%s: %v, want a refusal naming %s", c.name, err, c.setting)
		}
	}
	for _, c := range []struct {
		name   string
		a, b   treeSize
		want   treeSize
		within bool
	}{
		{"fits", treeSize{10, 100}, treeSize{90, 900}, treeSize{100, 1000}, true},
		{"entries pass", treeSize{10, 0}, treeSize{91, 0}, treeSize{101, 0}, false},
		{"bytes pass", treeSize{1, 10}, treeSize{1, 991}, treeSize{1, 1001}, false},
		// A subtree already past the limit, or a blob declaring an
		// absurd size: the sum stays just past the limit, never wraps.
		{"huge subtree", treeSize{50, 0}, treeSize{1 << 62, 0}, treeSize{101, 0}, false},
		{"huge blob", treeSize{1, 500}, treeSize{1, 1<<63 - 1}, treeSize{1, 1001}, false},
	} {
		got, within := c.a.add(c.b, lim)
		if got != c.want || within != c.within {
			t.Errorf("%s: %+v + %+v = %+v, %v; want %+v, %v", c.name, c.a, c.b, got, within, c.want, c.within)
		}
		if err := archiveVerdict(got, lim); (err == nil) != c.within {
			t.Errorf("%s: verdict on %+v: %v", c.name, got, err)
		}
	}

	w := newWork(context.Background(), Limits{MaxEntries: 10})
	if err := w.visit(10); err != nil {
		t.Fatalf("10 of 10 entries: %v", err)
	}
	if err := w.visit(1); !strings.Contains(fmt.Sprint(err), "(limit 10, set RGIT_API_MAX_ENTRIES)") {
		t.Fatalf("11 of 10 entries: %v", err)
	}
	w = newWork(context.Background(), Limits{MaxEntries: 10})
	w.extend(5)
	if err := w.visit(15); err != nil {
		t.Errorf("15 entries of 10 extended by 5: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newWork(ctx, Limits{}).visit(1); !errors.Is(err, context.Canceled) {
		t.Errorf("a gone client's walk goes on: %v", err)
	}
}

// bombRepo is a scratch repository made with the real git: base (a
// README) and bomb, base's child whose tree nests 6 levels of 10
// subtrees (a million paths, seven objects).
type bombRepo struct {
	g          *gitrun.Repo
	base, bomb object.ID
	bombTree   string
}

// bombPath is one of the bomb's million files.
var bombPath = []string{"0", "0", "0", "0", "0", "0"}

func newBombRepo(t *testing.T) *bombRepo {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	readme := strings.TrimSpace(string(g.Output([]byte("hi\n"), "hash-object", "-w", "--stdin")))
	baseTree := strings.TrimSpace(string(g.Output([]byte("100644 blob "+readme+"\tREADME\n"), "mktree")))
	base := g.Run("commit-tree", "-m", "base", baseTree)
	r := &bombRepo{g: g, bombTree: g.TreeBomb(6, 10, "boom\n")}
	bomb := g.Run("commit-tree", "-p", base, "-m", "bomb", r.bombTree)
	g.Run("update-ref", "refs/heads/main", bomb)
	r.base, r.bomb = object.MustID(base), object.MustID(bomb)
	return r
}

// objects packs the repository and opens it as the read API does.
func (r *bombRepo) objects(t testing.TB) *pack.Set {
	t.Helper()
	r.g.Run("repack", "-adq")
	packs, _ := filepath.Glob(filepath.Join(r.g.Dir, ".git", "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("%d packs", len(packs))
	}
	p, err := pack.Open(packs[0], strings.TrimSuffix(packs[0], ".pack")+".idx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return pack.NewSet(p)
}

// TestTreeBombAnswers: with the default limits, every answer over a tree
// of a million paths is a cheap refusal or an answer cut short that says
// so, and the entries each visits stay within the budget; an archive is
// refused after visiting its distinct trees only.
func TestTreeBombAnswers(t *testing.T) {
	r := newBombRepo(t)
	objs := r.objects(t)
	fresh := func(lim Limits) reader { return newReader(context.Background(), objs, lim) }
	within := func(t *testing.T, rd reader, most int64) {
		t.Helper()
		if rd.w.visited > most || rd.w.visited > DefaultMaxEntries {
			t.Errorf("visited %d tree entries, want at most %d", rd.w.visited, most)
		}
	}
	diffCut := func(t *testing.T, d diffAnswer) {
		t.Helper()
		if !d.Truncated || !strings.Contains(d.TruncatedReason, "set "+SettingMaxDiffFiles) || len(d.Files) != DefaultMaxDiffFiles || d.timedOut {
			t.Errorf("diff: truncated %v (%q), %d files, timed out %v", d.Truncated, d.TruncatedReason, len(d.Files), d.timedOut)
		}
		if d.Files[0].Path != "0/0/0/0/0/0" || d.Files[0].Status != "added" || d.Files[0].Additions != 1 {
			t.Errorf("first file %+v", d.Files[0])
		}
	}
	// A diff lists MaxDiffFiles files and their directories: about a
	// tenth more entries.
	const diffVisits = DefaultMaxDiffFiles * 12 / 10

	t.Run("commit", func(t *testing.T) {
		rd := fresh(Limits{})
		c, err := rd.commitWithDiff(r.bomb)
		if err != nil {
			t.Fatal(err)
		}
		diffCut(t, c.diffAnswer)
		within(t, rd, diffVisits)
	})
	t.Run("compare", func(t *testing.T) {
		rd := fresh(Limits{})
		c, err := rd.compare(r.base, r.bomb)
		if err != nil {
			t.Fatal(err)
		}
		if c.MergeBase != r.base.String() || c.Ahead != 1 || c.Behind != 0 {
			t.Errorf("compare: merge base %s, ahead %d, behind %d", c.MergeBase, c.Ahead, c.Behind)
		}
		diffCut(t, c.diffAnswer)
		within(t, rd, diffVisits)
	})
	t.Run("entries cut a diff", func(t *testing.T) {
		rd := fresh(Limits{MaxEntries: 500})
		c, err := rd.commitWithDiff(r.bomb)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Truncated || !strings.Contains(c.TruncatedReason, "set "+SettingMaxEntries) || len(c.Files) >= 500 {
			t.Errorf("diff: truncated %v (%q), %d files", c.Truncated, c.TruncatedReason, len(c.Files))
		}
		within(t, rd, 501)
	})
	for _, c := range []struct {
		name    string
		lim     Limits
		setting string
	}{
		{"archive entries", Limits{}, SettingMaxEntries},
		{"archive bytes", Limits{MaxEntries: 2_000_000, MaxArchiveBytes: 1 << 20}, SettingMaxArchiveBytes},
	} {
		t.Run(c.name, func(t *testing.T) {
			rd := fresh(c.lim)
			_, _, err := rd.openArchive(r.bomb)
			if le, ok := asLimit(err); !ok || le.Setting != c.setting {
				t.Fatalf("archive: %v, want a refusal naming %s", err, c.setting)
			}
			// Sizing reads each of the six distinct trees once.
			within(t, rd, 60)
		})
	}
	t.Run("tree along a path", func(t *testing.T) {
		rd := fresh(Limits{})
		entries, err := rd.tree(r.bomb, bombPath[:5])
		if err != nil || len(entries) != 10 || entries[0].Kind != "blob" {
			t.Fatalf("tree: %v, %+v", err, entries)
		}
		within(t, rd, 15)
	})
	t.Run("log with a path", func(t *testing.T) {
		rd := fresh(Limits{})
		commits, next, err := rd.log(r.bomb, 50, bombPath)
		if err != nil || len(commits) != 1 || commits[0].OID != r.bomb.String() || !next.IsZero() {
			t.Fatalf("log: %v, %d commits, next %s", err, len(commits), next)
		}
		within(t, rd, 12)
	})
	t.Run("a gone client stops every walk", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rd := newReader(ctx, objs, Limits{})
		_, err := rd.commitWithDiff(r.bomb)
		_, _, aerr := rd.openArchive(r.bomb)
		_, _, lerr := rd.log(r.bomb, 50, bombPath)
		_, herr := rd.ancestors(r.bomb)
		for name, err := range map[string]error{"diff": err, "archive": aerr, "log": lerr, "ancestors": herr} {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v, want context.Canceled", name, err)
			}
		}
	})
}

// TestDiffExpandsAPairOnce: two trees of a million paths that differ
// only in how their directory modes are written (git's fsck accepts a
// zero-padded "040000" as cosmetic) hold no change; the diff walk finds
// that by expanding each distinct pair of subtrees once.
func TestDiffExpandsAPairOnce(t *testing.T) {
	r := newBombRepo(t)
	// The same bomb with every directory entry written "040000".
	id := strings.TrimSpace(string(r.g.Output([]byte("boom\n"), "hash-object", "-w", "--stdin")))
	mode := "100644"
	for range 6 {
		var raw []byte
		oid := object.MustID(id)
		for i := range 10 {
			raw = append(raw, fmt.Sprintf("%s %d\x00", mode, i)...)
			raw = append(raw, oid[:]...)
		}
		id = strings.TrimSpace(string(r.g.Output(raw, "hash-object", "-w", "--stdin", "-t", "tree", "--literally")))
		mode = "040000"
	}
	if id == r.bombTree {
		t.Fatal("the padded twin has the bomb's id")
	}
	twin := r.g.Run("commit-tree", "-p", r.bomb.String(), "-m", "twin", id)
	r.g.Run("update-ref", "refs/heads/twin", twin)
	rd := newReader(context.Background(), r.objects(t), Limits{})
	c, err := rd.commitWithDiff(object.MustID(twin))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 0 || c.Truncated {
		t.Errorf("%d files, truncated %v (%s)", len(c.Files), c.Truncated, c.TruncatedReason)
	}
	// Each of the six levels: ten entries a side, once.
	if rd.w.visited > 6*2*10 {
		t.Errorf("visited %d tree entries", rd.w.visited)
	}
}

// diffRepo commits files (path → content) on top of a first commit with
// first, and returns the reader over it and the second commit.
func diffRepo(t *testing.T, lim Limits, first, second map[string]string) (reader, object.ID) {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	commit := func(files map[string]string) string {
		g.Run("rm", "-rq", "--ignore-unmatch", ".")
		for name, content := range files {
			g.Write(name, content)
		}
		g.Run("add", "-A")
		g.Run("commit", "-q", "--allow-empty", "-m", "c")
		return g.Run("rev-parse", "HEAD")
	}
	commit(first)
	head := commit(second)
	r := &bombRepo{g: g}
	return newReader(context.Background(), r.objects(t), lim), object.MustID(head)
}

// TestDiffLimits: a file over MaxDiffFileBytes shows as binary, as git
// shows files past core.bigFileThreshold; past the time budget files are
// listed without lines and the answer says so (and is marked not to be
// stored); RenameLimit stops renames by content but not identical ones.
func TestDiffLimits(t *testing.T) {
	lines := func(tag string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s line %d of a file that moves\n", tag, i)
		}
		return b.String()
	}
	t.Run("big file", func(t *testing.T) {
		rd, head := diffRepo(t, Limits{MaxDiffFileBytes: 1000},
			map[string]string{"big.txt": lines("a", 100), "small.txt": "one\n"},
			map[string]string{"big.txt": lines("b", 100), "small.txt": "two\n"})
		c, err := rd.commitWithDiff(head)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Files) != 2 || !c.Files[0].Binary || c.Files[1].Binary || c.Truncated {
			t.Fatalf("files %+v, truncated %v", c.Files, c.Truncated)
		}
		if !strings.Contains(c.Diff, "Binary files a/big.txt and b/big.txt differ") || !strings.Contains(c.Diff, "-one\n+two\n") {
			t.Errorf("diff:\n%s", c.Diff)
		}
	})
	t.Run("time budget", func(t *testing.T) {
		rd, head := diffRepo(t, Limits{DiffTimeout: time.Nanosecond},
			map[string]string{"a.txt": "one\n", "b.txt": "one\n"},
			map[string]string{"a.txt": "two\n", "b.txt": "two\n"})
		c, err := rd.commitWithDiff(head)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Files) != 2 || !c.Truncated || !c.timedOut || !strings.Contains(c.TruncatedReason, "set "+SettingDiffTimeout) || c.Diff != "" {
			t.Errorf("files %+v, truncated %v (%q), timed out %v, diff %q", c.Files, c.Truncated, c.TruncatedReason, c.timedOut, c.Diff)
		}
	})
	t.Run("rename limit", func(t *testing.T) {
		first := map[string]string{"old1.txt": lines("x", 50), "old2.txt": lines("y", 50), "same-old.txt": lines("z", 50)}
		second := map[string]string{"new1.txt": lines("x", 50) + "edit\n", "new2.txt": lines("y", 50) + "edit\n", "same-new.txt": lines("z", 50)}
		statuses := func(lim Limits) string {
			rd, head := diffRepo(t, lim, first, second)
			c, err := rd.commitWithDiff(head)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, f := range c.Files {
				out = append(out, f.Status+" "+f.Path)
			}
			return strings.Join(out, ", ")
		}
		if got, want := statuses(Limits{}), "renamed new1.txt, renamed new2.txt, renamed same-new.txt"; got != want {
			t.Errorf("default limit: %s, want %s", got, want)
		}
		// Past the limit (one file a side, after identical content has
		// paired up), content is not compared.
		if got, want := statuses(Limits{RenameLimit: 1}), "added new1.txt, added new2.txt, deleted old1.txt, deleted old2.txt, renamed same-new.txt"; got != want {
			t.Errorf("limit 2: %s, want %s", got, want)
		}
	})
}

// TestLogScanLimit: a path-filtered page stops after MaxLogScan commits
// with its next page where it stopped, and following the pages finds the
// commit that touched the path.
func TestLogScanLimit(t *testing.T) {
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	g.Write("deep/file.txt", "once\n")
	g.Run("add", "-A")
	g.Run("commit", "-q", "-m", "touch")
	touched := g.Run("rev-parse", "HEAD")
	for i := range 25 {
		g.Write("other.txt", fmt.Sprint(i))
		g.Run("add", "-A")
		g.Run("commit", "-q", "-m", "other")
	}
	head := object.MustID(g.Run("rev-parse", "HEAD"))
	objs := (&bombRepo{g: g}).objects(t)
	var pages [][]commitAnswer
	for cur := head; !cur.IsZero(); {
		rd := newReader(context.Background(), objs, Limits{MaxLogScan: 10})
		commits, next, err := rd.log(cur, 50, []string{"deep", "file.txt"})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, commits)
		if len(pages) > 5 {
			t.Fatal("paging does not end")
		}
		cur = next
	}
	if len(pages) != 3 || len(pages[0]) != 0 || len(pages[1]) != 0 || len(pages[2]) != 1 || pages[2][0].OID != touched {
		t.Errorf("pages %v", pages)
	}
}

// TestArchiveStreamsBlobs: archive entries carry the blob's stream and
// size, not its bytes in memory (the writers copy from the pack).
func TestArchiveStreamsBlobs(t *testing.T) {
	rd, head := diffRepo(t, Limits{}, map[string]string{}, map[string]string{"a/b.txt": "content\n"})
	tree, _, err := rd.openArchive(head)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = rd.walkTree(tree, "", func(e archiveEntry) error {
		if e.content == nil {
			got = append(got, e.path)
			return nil
		}
		b, err := io.ReadAll(e.content)
		got = append(got, fmt.Sprintf("%s %d %q", e.path, e.size, b))
		return err
	})
	if err != nil || strings.Join(got, "; ") != `a/; a/b.txt 8 "content\n"` {
		t.Errorf("%v: %s", err, strings.Join(got, "; "))
	}
}

// TestTreeListingCap: a directory of more than maxTreeListing entries
// is refused before any entry's size is read.
func TestTreeListingCap(t *testing.T) {
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	blob := strings.TrimSpace(string(g.Output([]byte("x\n"), "hash-object", "-w", "--stdin")))
	var b strings.Builder
	for i := range maxTreeListing + 1 {
		fmt.Fprintf(&b, "100644 blob %s\tf%07d\n", blob, i)
	}
	tree := strings.TrimSpace(string(g.Output([]byte(b.String()), "mktree")))
	g.Run("update-ref", "refs/heads/main", g.Run("commit-tree", "-m", "wide", tree))
	rd := newReader(context.Background(), (&bombRepo{g: g}).objects(t), Limits{})
	_, err := rd.tree(object.MustID(tree), nil)
	if err == nil || err.Error() != "tree has too many entries to list (limit 100000, fixed)" {
		t.Fatalf("listing %d entries: %v", maxTreeListing+1, err)
	}
	if rd.w.visited != 0 {
		t.Errorf("refusal visited %d entries", rd.w.visited)
	}
}
