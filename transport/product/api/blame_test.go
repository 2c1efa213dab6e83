package api

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
)

// codeLines are what the histories below write: code-like lines, many
// of them repeated (blank lines, braces, returns), so that git's choice
// among equally short line pairings is exercised, not only unique lines.
var codeLines = []string{"", "", "}", "}", "\t}", "\treturn nil", "\treturn err", "\tif err != nil {", "\t\treturn err", "\t}",
	"// comment", "\tx++", "\tdefer f.Close()", "\t\tcontinue", "\tfor i := range n {", "\t\tbreak"}

// blameHistory writes a history of file edits by six authors on main:
// inserts, deletes, rewrites, moves of blocks, lines deleted and added
// back later, copies, a rename, and a merge of a side branch (whose
// lines first-parent blame gives the merge). It returns the repository
// and the path of the file at HEAD.
func blameHistory(t testing.TB, seed uint64, commits int) (*gitrun.Repo, string) {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("a0", "a0@x", "1700000000 +0000")})
	rng := rand.New(rand.NewPCG(seed, 7))
	var lines, deleted []string
	fresh := 0
	newLine := func() string {
		if rng.IntN(3) == 0 {
			return codeLines[rng.IntN(len(codeLines))]
		}
		fresh++
		return fmt.Sprintf("\tv%d := call(%d)", fresh, rng.IntN(1000))
	}
	path := "src/file.go"
	edit := func() {
		n := len(lines)
		at := rng.IntN(n + 1)
		k := 1 + rng.IntN(6)
		end := min(n, at+k)
		switch op := rng.IntN(7); {
		case op <= 1 || n < 10: // insert
			var add []string
			for range k {
				add = append(add, newLine())
			}
			lines = append(lines[:at], append(add, lines[at:]...)...)
		case op == 2: // delete, keeping the lines to add back later
			deleted = append(deleted, lines[at:end]...)
			lines = append(lines[:at], lines[end:]...)
		case op == 3: // rewrite
			for i := at; i < end; i++ {
				lines[i] = newLine()
			}
		case op == 4: // move a block
			block := append([]string(nil), lines[at:end]...)
			lines = append(lines[:at], lines[end:]...)
			to := rng.IntN(len(lines) + 1)
			lines = append(lines[:to], append(block, lines[to:]...)...)
		case op == 5 && len(deleted) > 0: // add deleted lines back
			i := rng.IntN(len(deleted))
			j := min(len(deleted), i+k)
			lines = append(lines[:at], append(append([]string(nil), deleted[i:j]...), lines[at:]...)...)
		default: // copy a block
			block := append([]string(nil), lines[at:end]...)
			to := rng.IntN(len(lines) + 1)
			lines = append(lines[:to], append(block, lines[to:]...)...)
		}
	}
	commit := func(i int, msg string) {
		a := "a" + strconv.Itoa(rng.IntN(6))
		g.Env.Ident.Author.Name, g.Env.Ident.Author.Email = a, a+"@x"
		g.At(1700000000 + int64(i)*3600)
		g.Write(path, strings.Join(lines, "\n")+"\n")
		g.Run("add", "-A")
		g.Run("commit", "-q", "--allow-empty", "-m", msg)
	}
	for range 30 {
		lines = append(lines, newLine())
	}
	commit(0, "start")
	for i := 1; i < commits; i++ {
		for range 1 + rng.IntN(3) {
			edit()
		}
		switch i {
		case commits / 3:
			g.Run("rm", "-q", path)
			path = "pkg/moved.go"
		case commits / 2:
			g.Run("checkout", "-q", "-b", "side")
			for j := range 2 {
				edit()
				commit(i, fmt.Sprintf("side %d", j))
			}
			g.Run("checkout", "-q", "main")
			g.Run("merge", "-q", "--no-ff", "-m", "merge side", "side")
			continue
		}
		commit(i, fmt.Sprintf("edit %d\n\nbody", i))
	}
	return g, path
}

// gitBlame is `git blame --first-parent --porcelain` of path at rev: for
// each line, its commit and its line number there (0-based).
func gitBlame(t *testing.T, g *gitrun.Repo, rev, path string) []lineOrigin {
	t.Helper()
	var out []lineOrigin
	for line := range strings.Lines(g.Run("blame", "--first-parent", "--porcelain", rev, "--", path)) {
		f := strings.Fields(line)
		if len(f) < 3 || len(f[0]) != 40 || strings.HasPrefix(line, "\t") {
			continue
		}
		id, ok := object.ParseHex(f[0])
		orig, err := strconv.Atoi(f[1])
		if !ok || err != nil {
			continue
		}
		out = append(out, lineOrigin{id, orig - 1})
	}
	return out
}

// TestBlameMatchesGit: on histories of many authors with moved,
// deleted and re-added lines, a rename and a merge, every line's commit
// and its line there are git blame --first-parent's, at every commit of
// main, cold and with a walk memo the blames before filled (at both
// paths); the runs cover the file and each commit named is described.
func TestBlameMatchesGit(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			g, path := blameHistory(t, seed, 60)
			objs := (&bombRepo{g: g}).objects(t)
			revs := strings.Fields(g.Run("rev-list", "--first-parent", "main"))
			memo := NewWalkMemo(WalkMemoBytes)
			checked := 0
			for _, rev := range revs {
				file := path
				if !g.Try(nil, "cat-file", "-e", rev+":"+file).OK() {
					file = "src/file.go" // before the rename
				}
				want := gitBlame(t, g, rev, file)
				checked++
				// Cold, and with what the blames of newer commits learnt
				// (walkmemo.go): the memo must not change an answer.
				for _, memo := range []*WalkMemo{nil, memo} {
					rd := newReader(context.Background(), objs, Limits{})
					rd.memo = memo
					got, err := rd.blame(object.MustID(rev), strings.Split(file, "/"))
					if err != nil {
						t.Fatal(err)
					}
					if got.Truncated || got.Lines != len(want) {
						t.Fatalf("%s: %d lines (truncated %v), git blames %d", rev, got.Lines, got.Truncated, len(want))
					}
					for j, w := range want {
						if got.origins[j] != w {
							t.Fatalf("%s line %d (memo %v): commit %s line %d, git says %s line %d", rev[:8], j+1, memo != nil,
								got.origins[j].commit, got.origins[j].line+1, w.commit, w.line+1)
						}
					}
					checkRuns(t, got)
				}
			}
			for _, p := range []string{path, "src/file.go"} {
				if f := memo.take(memoKey{objs.ID(), p}); len(f) < 20 {
					t.Errorf("the memo holds %d commits' facts at %s", len(f), p)
				}
			}
			if checked < 50 {
				t.Errorf("only %d commits checked", checked)
			}
		})
	}
}

// checkRuns: the runs cover the lines in order, each the longest stretch
// of one commit's lines, and every commit named is described.
func checkRuns(t *testing.T, a blameAnswer) {
	t.Helper()
	next := 1
	for k, r := range a.Runs {
		if r.Start != next || r.Count < 1 || k > 0 && a.Runs[k-1].Commit == r.Commit {
			t.Fatalf("run %d %+v after line %d", k, r, next-1)
		}
		for j := r.Start; j < r.Start+r.Count; j++ {
			if a.origins[j-1].commit.String() != r.Commit {
				t.Fatalf("run %+v holds line %d of %s", r, j, a.origins[j-1].commit)
			}
		}
		c, ok := a.Commits[r.Commit]
		if !ok || c.Author.Name == "" || c.Summary == "" || c.Path == "" {
			t.Fatalf("commit %s described as %+v", r.Commit, c)
		}
		next += r.Count
	}
	if next != a.Lines+1 {
		t.Fatalf("runs end at line %d of %d", next-1, a.Lines)
	}
}

// TestBlameBudget: with a small commit budget the blame stops after that
// many commits, the lines left are the oldest commit's reached, and the
// answer says so; the time budget does the same and marks the answer
// not to be stored; a binary file and a file over the size limit are
// refused, and an older version over it stops the walk.
func TestBlameBudget(t *testing.T) {
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Fixed("T", "t@x", "1700000000 +0000")})
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("line %d", i))
		g.Write("f.txt", strings.Join(lines, "\n")+"\n")
		g.Run("add", "-A")
		g.Run("commit", "-q", "-m", fmt.Sprint("add ", i))
	}
	g.Write("bin.dat", "a\x00b\n")
	g.Write("shrink.txt", strings.Repeat("gone\n", 200)+"kept\n")
	g.Run("add", "-A")
	g.Run("commit", "-q", "-m", "big")
	g.Write("shrink.txt", "kept\n")
	g.Run("add", "-A")
	g.Run("commit", "-q", "-m", "binary")
	head := object.MustID(g.Run("rev-parse", "HEAD"))
	revs := strings.Fields(g.Run("rev-list", "HEAD"))
	objs := (&bombRepo{g: g}).objects(t)
	blame := func(lim Limits, file string) (blameAnswer, error) {
		return newReader(context.Background(), objs, lim).blame(head, []string{file})
	}

	full, err := blame(Limits{}, "f.txt")
	if err != nil || full.Truncated || len(full.Runs) != 40 {
		t.Fatalf("full blame: %d runs, truncated %v, %v", len(full.Runs), full.Truncated, err)
	}
	cut, err := blame(Limits{MaxBlameCommits: 10}, "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	// Ten commits examined: HEAD and its parent (neither changes f.txt)
	// and eight that added a line each; the eleventh reached keeps the
	// 32 lines left.
	oldest := revs[10]
	if !cut.Truncated || cut.timedOut || !strings.Contains(cut.TruncatedReason, "set "+SettingMaxBlameCommits) {
		t.Errorf("truncated %v (%q)", cut.Truncated, cut.TruncatedReason)
	}
	if len(cut.Runs) != 9 || cut.Runs[0].Commit != oldest || cut.Runs[0].Count != 32 {
		t.Errorf("runs %+v, want 32 lines of %s first", cut.Runs, oldest)
	}
	for i, r := range cut.Runs[1:] {
		if r != full.Runs[32+i] {
			t.Errorf("run %+v, the full blame's %+v", r, full.Runs[32+i])
		}
	}

	timed, err := blame(Limits{BlameTimeout: time.Nanosecond}, "f.txt")
	if err != nil || !timed.Truncated || !timed.timedOut || !strings.Contains(timed.TruncatedReason, "set "+SettingBlameTimeout) ||
		len(timed.Runs) != 1 || timed.Runs[0].Commit != head.String() {
		t.Errorf("timed out: %+v, %v", timed, err)
	}

	if _, err := blame(Limits{}, "bin.dat"); !errors.Is(err, errNotText) {
		t.Errorf("binary file: %v", err)
	}
	if _, err := blame(Limits{MaxBlameFileBytes: 100}, "f.txt"); err == nil || !strings.Contains(err.Error(), "set "+SettingMaxBlameFileBytes) {
		t.Errorf("file over the limit: %v", err)
	}
	// shrink.txt was 1 KiB in HEAD's parent: past the limit the walk
	// stops at HEAD, which keeps the line.
	small, err := blame(Limits{MaxBlameFileBytes: 500}, "shrink.txt")
	if err != nil || !small.Truncated || !strings.Contains(small.TruncatedReason, "older version") ||
		len(small.Runs) != 1 || small.Runs[0].Commit != head.String() {
		t.Errorf("older version over the limit: %+v, %v", small, err)
	}
	if whole, err := blame(Limits{}, "shrink.txt"); err != nil || whole.Truncated || whole.Runs[0].Commit != revs[1] {
		t.Errorf("shrink.txt: %+v, %v", whole, err)
	}
}

// TestBlameEndpoint: the endpoint answers the blame as JSON, cacheable
// like the other id answers; no path is 400, a missing file 404.
func TestBlameEndpoint(t *testing.T) {
	r := newLocalRepo(t)
	srv := newTestHandler(t, nil, newLocal(t, r.open(t)))
	code, h, body := get(t, srv, "/api/alice/site/blame/"+r.main.String()+"/README.md")
	if code != http.StatusOK || !strings.Contains(body, `"runs":[{"commit":"`+r.main.String()+`","start":1,"count":1}]`) ||
		!strings.Contains(h.Get("Cache-Control"), "immutable") || h.Get("ETag") == "" {
		t.Errorf("blame: %d %s %q", code, body, h.Get("Cache-Control"))
	}
	for path, want := range map[string]int{"blame/" + r.main.String(): 400, "blame/" + r.main.String() + "/nope": 404} {
		if code, _, body := get(t, srv, "/api/alice/site/"+path); code != want {
			t.Errorf("%s: %d %s, want %d", path, code, body, want)
		}
	}
}

// TestMatchLinesMatchesGitDiff: matchLines pairs the lines of two
// versions exactly as `git diff -U0` does (the same xdiff run blame
// makes), on pairs built to reach every part of xdiff's procedure: many
// repeated lines (its cleanup of lines with many equals), large rewrites
// (its cost cut-offs) and long common tails (its tail trim).
func TestMatchLinesMatchesGitDiff(t *testing.T) {
	g := gitrun.Scratch(t, gitrun.Env{})
	rng := rand.New(rand.NewPCG(11, 13))
	for c := range 32 {
		// Four kinds of pairs: code-like lines; braces amid lines found
		// on one side only; a long common tail with lines like it
		// inserted before it; and large files with long moved blocks.
		kind := c % 4
		n := 20 + rng.IntN(60)
		line := func() string {
			switch {
			case kind == 1 && rng.IntN(4) == 0:
				return "}"
			case kind == 1:
				return fmt.Sprintf("unique %d", rng.Int())
			case kind == 3:
				return fmt.Sprintf("l%d", rng.IntN(n/2))
			case rng.IntN(4) == 0:
				return fmt.Sprintf("unique %d", rng.Int())
			}
			return codeLines[rng.IntN(len(codeLines))] + strconv.Itoa(rng.IntN(3))
		}
		switch {
		case c == 31:
			// Past 32768 lines a side xdiff looks for long snakes before
			// its cost cut-off.
			n = 34000
		case kind == 3:
			n = 1500 + rng.IntN(1500)
		}
		var a []string
		for range n {
			a = append(a, line())
		}
		b := append([]string(nil), a...)
		for range 1 + rng.IntN(n/4+1) {
			at := rng.IntN(len(b) + 1)
			switch op := rng.IntN(4); {
			case kind == 1 && op == 0: // rewrite a long block
				for i := at; i < min(len(b), at+8+rng.IntN(8)); i++ {
					b[i] = line()
				}
			case kind == 3 && op == 0 && at < len(b): // move a long block
				end := min(len(b), at+20+rng.IntN(60))
				block := append([]string(nil), b[at:end]...)
				b = append(b[:at], b[end:]...)
				to := rng.IntN(len(b) + 1)
				b = append(b[:to], append(block, b[to:]...)...)
			case op <= 1:
				b = append(b[:at], append([]string{line(), line()}, b[at:]...)...)
			case op == 2:
				b = append(b[:at], b[min(len(b), at+1+rng.IntN(3)):]...)
			case at < len(b):
				b[at] = line()
			}
		}
		tail := ""
		if kind == 2 {
			tail = strings.Repeat("common tail line\n", 200+rng.IntN(100))
			b = append(b, "common tail line")
		}
		at, bt := strings.Join(a, "\n")+"\n"+tail, strings.Join(b, "\n")+"\n"+tail
		g.Write("a", at)
		g.Write("b", bt)
		out := g.Try(nil, "diff", "--no-index", "-U0", "a", "b").Stdout
		oldChanged, newChanged := map[int]bool{}, map[int]bool{}
		for l := range strings.Lines(out) {
			var o, oc, nw, nc int
			if !strings.HasPrefix(l, "@@ ") {
				continue
			}
			f := strings.Fields(l)
			o, oc = hunkRange(f[1])
			nw, nc = hunkRange(f[2])
			for i := range oc {
				oldChanged[o+i] = true
			}
			for i := range nc {
				newChanged[nw+i] = true
			}
		}
		match := matchLines([]byte(at), []byte(bt))
		kept := map[int]bool{}
		for j, m := range match {
			if (m < 0) != newChanged[j] {
				t.Fatalf("case %d (%d lines): new line %d changed: git %v, matchLines %v", c, n, j+1, newChanged[j], m < 0)
			}
			if m >= 0 {
				kept[m] = true
			}
		}
		for i := range len(splitLines([]byte(at))) {
			if kept[i] == oldChanged[i] {
				t.Fatalf("case %d (%d lines): old line %d changed: git %v, matchLines %v", c, n, i+1, oldChanged[i], !kept[i])
			}
		}
	}
}

// hunkRange reads "-start,count" or "+start" of a hunk header as the
// 0-based first line and the count.
func hunkRange(s string) (int, int) {
	start, count, ok := strings.Cut(s[1:], ",")
	st, _ := strconv.Atoi(start)
	n := 1
	if ok {
		n, _ = strconv.Atoi(count)
	}
	return st - 1, n
}

// BenchmarkBlameVsGit blames the file of a 300-commit history of six
// authors with rgit and with git blame --first-parent on the same
// repository, in the same run: rgit-ns/op and git-ns/op (its process
// start included; ns/op is both), ratio rgit's time over git's.
func BenchmarkBlameVsGit(b *testing.B) {
	g, path := blameHistory(b, 1, 300)
	objs := (&bombRepo{g: g}).objects(b)
	head := object.MustID(g.Run("rev-parse", "HEAD"))
	var ours, git time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := newReader(context.Background(), objs, Limits{}).blame(head, strings.Split(path, "/")); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)
		start = time.Now()
		g.Run("blame", "--first-parent", "--porcelain", "HEAD", "--", path)
		git += time.Since(start)
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "rgit-ns/op")
	b.ReportMetric(float64(git.Nanoseconds())/float64(b.N), "git-ns/op")
	b.ReportMetric(float64(ours)/float64(git), "ratio")
}
