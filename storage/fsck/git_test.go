package fsck

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
)

// gitRepo creates an empty repository and returns a function running git
// in it.
func gitRepo(t *testing.T) (dir string, git func(stdin []byte, args ...string) []byte) {
	t.Helper()
	g := gitrun.Scratch(t, gitrun.Env{Ident: gitrun.Ident{
		Author:    gitrun.Sig{Name: "A U Thor", Email: "author@example.com", Date: "1700000000 +0130"},
		Committer: gitrun.Sig{Name: "C O Mitter", Email: "committer@example.com", Date: "1700000000 -0800"},
	}})
	git = func(stdin []byte, args ...string) []byte {
		t.Helper()
		r := g.Try(stdin, args...)
		if !r.OK() && args[0] != "fsck" { // fsck exits non-zero on findings
			t.Fatalf("%s", r)
		}
		return []byte(r.Stdout + r.Stderr)
	}
	return g.Dir, git
}

type rawObject struct {
	id   object.ID
	typ  object.Type
	data []byte
}

// allObjects reads every object of the repository.
func allObjects(t *testing.T, git func([]byte, ...string) []byte) []rawObject {
	t.Helper()
	out := bufio.NewReader(bytes.NewReader(git(nil, "cat-file", "--batch-all-objects", "--batch")))
	var objs []rawObject
	for {
		hdr, err := out.ReadString('\n')
		if err == io.EOF {
			return objs
		}
		f := strings.Fields(hdr)
		if err != nil || len(f) != 3 {
			t.Fatalf("cat-file header %q: %v", hdr, err)
		}
		typ, err := object.ParseType(f[1])
		if err != nil {
			t.Fatal(err)
		}
		size, _ := strconv.Atoi(f[2])
		data := make([]byte, size+1) // content and '\n'
		if _, err := io.ReadFull(out, data); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, rawObject{object.MustID(f[0]), typ, data[:size]})
	}
}

// checkAll checks objs in order and then the .gitmodules blobs that were
// seen before their trees, as the indexer does.
func checkAll(c *Checker, objs []rawObject) error {
	byID := map[object.ID]rawObject{}
	for _, o := range objs {
		byID[o.id] = o
		if err := c.Check(o.id, o.typ, o.data); err != nil {
			return err
		}
	}
	for _, id := range c.GitmodulesBlobs() {
		o, ok := byID[id]
		if !ok {
			return c.MissingGitmodules(id)
		}
		if err := c.CheckGitmodules(id, o.data); err != nil {
			return err
		}
	}
	return nil
}

// TestRealRepository checks every object of a repository built by git:
// commits, merges, annotated tags, symlinks, executables, submodules.
func TestRealRepository(t *testing.T) {
	dir, git := gitRepo(t)
	write := func(name, content string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("README", "hello\n", 0o644)
	write("bin/run.sh", "#!/bin/sh\n", 0o755)
	write("a.c", "int x;\n", 0o644)
	write("a/b/c.txt", "deep\n", 0o644)
	write(".gitignore", "*.o\n", 0o644)
	write(".gitattributes", "*.c diff=cpp\n", 0o644)
	write(".mailmap", "A <a@x>\n", 0o644)
	write(".gitmodules", "[submodule \"lib\"]\n\tpath = lib\n\turl = https://example.com/lib.git\n[submodule \"rel\"]\n\tpath = rel\n\turl = ../rel.git\n", 0o644)
	if err := os.Symlink("README", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	git(nil, "add", "-A")
	git(nil, "update-index", "--add", "--cacheinfo", "160000,"+hex40+",lib")
	git(nil, "commit", "-q", "-m", "first")
	git(nil, "tag", "-a", "-m", "release", "v1.0")
	git(nil, "checkout", "-q", "-b", "side")
	write("side.txt", "side\n", 0o644)
	git(nil, "add", "-A")
	git(nil, "commit", "-q", "-m", "side\n\nbody")
	git(nil, "checkout", "-q", "main")
	write("main.txt", "main\n", 0o644)
	git(nil, "add", "-A")
	git(nil, "commit", "-q", "-m", "main")
	git(nil, "merge", "-q", "--no-edit", "side")
	git(nil, "tag", "-a", "-m", "tag of tag", "nested/v2", "v1.0")

	objs := allObjects(t, git)
	if len(objs) < 20 {
		t.Fatalf("only %d objects", len(objs))
	}
	c := NewChecker(Options{Strict: true, RejectInfo: true})
	if err := checkAll(c, objs); err != nil {
		t.Fatal(err)
	}
	// Same objects in reverse order (trees before their blobs).
	slices.Reverse(objs)
	if err := checkAll(NewChecker(Options{Strict: true}), objs); err != nil {
		t.Fatal(err)
	}
}

var (
	fsckLine        = regexp.MustCompile(`(?m)^(?:warning|error) in (tree|commit|tag|blob) ([0-9a-f]{40}): (\w+):`)
	fsckUnparseable = regexp.MustCompile(`(?m)^error: ([0-9a-f]{40}): object could not be parsed`)
)

// unparseable marks objects git's parser rejects before fsck sees them.
const unparseable = "(unparseable)"

// gitFindings runs git fsck and returns the msg ids it reports per object.
func gitFindings(git func([]byte, ...string) []byte) map[object.ID][]string {
	out := git(nil, "fsck", "--strict", "--no-dangling", "--no-progress")
	if os.Getenv("FSCK_DEBUG") != "" {
		os.Stderr.Write(out)
	}
	m := map[object.ID][]string{}
	for _, sm := range fsckLine.FindAllSubmatch(out, -1) {
		id := object.MustID(string(sm[2]))
		m[id] = append(m[id], string(sm[3]))
	}
	for _, sm := range fsckUnparseable.FindAllSubmatch(out, -1) {
		id := object.MustID(string(sm[1]))
		m[id] = append(m[id], unparseable)
	}
	return m
}

// TestTreeNamesAgainstGit compares the name checks (hasDotgit and the
// dotfile symlink checks) with the installed git's fsck, on fixed names
// and on a deterministic random sample of lookalikes.
func TestTreeNamesAgainstGit(t *testing.T) {
	dir, git := gitRepo(t)
	blob := object.MustID(strings.TrimSpace(string(git([]byte("x"), "hash-object", "-w", "--stdin"))))
	names := slices.Concat(dangerousDotGit, safeDotGit)
	for _, l := range [][]string{
		{".gitmodules", "GITMOD~1", "gi7eba~1", "gi7eb~12", ".gitmodules . ", "x\\.gitmodules", "x\\gitmod~1"},
		{".gitattributes", "gitatt~1", "gi7d29~1", ".gitignore", "GITIGN~1", "gi250a~1", ".mailmap", "MAILMA~1", "maba30~1"},
	} {
		names = append(names, l...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{".", "g", "G", "i", "t", "git", "~", "1", "4", "9", " ", ":", "\\", "\u200c", "\ufeff", "\u200b",
		"mod", "gitmodules", "gi7eba", "ules", "att", "mailmap", "ma", "x", "\xff"}
	for range 300 {
		var b strings.Builder
		for range 1 + rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		names = append(names, b.String())
	}
	type crafted struct {
		desc string
		data []byte
	}
	trees := map[object.ID]crafted{}
	for _, n := range names {
		for _, mode := range []string{"100644", "120000"} {
			tree := mkTree(ent{mode, n, blob})
			id := object.Hash(object.Tree, tree)
			if _, dup := trees[id]; dup {
				continue
			}
			trees[id] = crafted{fmt.Sprintf("%s %q", mode, n), tree}
			writeLoose(t, dir, object.Tree, tree)
		}
	}
	relevant := []string{HasDotgit, GitmodulesSymlink, GitattributesSymlink, GitignoreSymlink, MailmapSymlink, HasDot, HasDotdot}
	gitSays := gitFindings(git)
	flagged := map[string]int{}
	for id, tr := range trees {
		r := &report{c: NewChecker(Options{Strict: true}), id: id}
		r.c.checkTree(r, tr.data)
		for _, check := range relevant {
			want := slices.Contains(gitSays[id], check)
			if want {
				flagged[check]++
			}
			if got := slices.Contains(r.found, check); got != want {
				t.Errorf("tree %s: %s: rgit %v, git %v", tr.desc, check, got, want)
			}
		}
	}
	// Guard against a vacuous pass (git not reporting anything).
	for _, check := range relevant[:5] {
		if flagged[check] == 0 {
			t.Errorf("git flagged no tree with %s", check)
		}
	}
	t.Logf("%d trees, git findings: %v", len(trees), flagged)
}

// writeLoose stores an object as a loose object without any validation,
// like "git hash-object --literally" but without a process per object.
func writeLoose(t *testing.T, repo string, typ object.Type, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	zw.Write(object.AppendHeader(nil, typ, int64(len(data))))
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	hex := object.Hash(typ, data).String()
	p := filepath.Join(repo, ".git", "objects", hex[:2], hex[2:])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o444); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
}

// TestGitmodulesAgainstGit runs every .gitmodules case through git fsck
// (the blob named .gitmodules by a tree) and compares the findings.
func TestGitmodulesAgainstGit(t *testing.T) {
	dir, git := gitRepo(t)
	type crafted struct{ name, want string }
	blobs := map[object.ID]crafted{}
	for _, tc := range gitmodulesCases {
		data := []byte(tc.data)
		id := object.Hash(object.Blob, data)
		blobs[id] = crafted{tc.name, tc.want}
		writeLoose(t, dir, object.Blob, data)
		writeLoose(t, dir, object.Tree, mkTree(ent{"100644", ".gitmodules", id}))
	}
	gitSays := gitFindings(git)
	newGit := gitAtLeast(git, 2, 44)
	for id, b := range blobs {
		var gitIDs []string
		for _, check := range gitSays[id] {
			if strings.HasPrefix(check, "gitmodules") {
				gitIDs = append(gitIDs, check)
			}
		}
		slices.Sort(gitIDs)
		gitIDs = slices.Compact(gitIDs)
		if needsGit244[b.name] && !newGit {
			continue
		}
		var want []string
		if b.want != "" && !rgitStricter[b.name] {
			want = []string{b.want}
		}
		// A parse error after a bad entry: git reports both.
		if b.name == "entries before parse error checked" {
			want = []string{GitmodulesParse, GitmodulesURL}
		}
		if !slices.Equal(gitIDs, want) {
			t.Errorf("case %q: git reports %v, rgit expects %v", b.name, gitIDs, want)
		}
	}
}

// gitAtLeast reports whether the installed git is at least major.minor.
func gitAtLeast(git func([]byte, ...string) []byte, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(string(git(nil, "version")), "git version %d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// rgitStricterHeaders lists commit/tag cases where rgit deliberately
// rejects what git accepts.
var rgitStricterHeaders = map[string]bool{
	"badTreeSha1 uppercase": true, // rgit's parsers need lowercase ids
	"badDate sign":          true, // git parses dates with strtoumax, which takes a sign
}

// TestHeadersAgainstGit compares the findings on every crafted commit and
// tag with git fsck's, in order. Like git fsck, checking goes on after a
// non-rejecting (info) finding and stops at the first rejecting one.
func TestHeadersAgainstGit(t *testing.T) {
	dir, git := gitRepo(t)
	type crafted struct {
		name string
		typ  object.Type
		data []byte
	}
	var objs []crafted
	for _, tc := range commitCases {
		objs = append(objs, crafted{tc.name, object.Commit, tc.data})
	}
	for _, tc := range tagCases {
		objs = append(objs, crafted{tc.name, object.Tag, tc.data})
	}
	for _, o := range objs {
		if len(o.data) > 0 {
			writeLoose(t, dir, o.typ, o.data)
		}
	}
	gitSays := gitFindings(git)
	for _, o := range objs {
		if len(o.data) == 0 || rgitStricterHeaders[o.name] {
			continue // git cannot store an empty commit file
		}
		id := object.Hash(o.typ, o.data)
		r := &report{c: NewChecker(Options{Strict: true}), id: id}
		if o.typ == object.Commit {
			checkCommit(r, o.data)
		} else {
			checkTag(r, o.data)
		}
		if slices.Contains(gitSays[id], unparseable) {
			// git's parser refused it before fsck ran; rgit must reject.
			if r.err == nil {
				t.Errorf("%v %q: git cannot parse it, rgit accepts", o.typ, o.name)
			}
			continue
		}
		if !slices.Equal(r.found, gitSays[id]) {
			t.Errorf("%v %q: rgit finds %v, git %v", o.typ, o.name, r.found, gitSays[id])
		}
	}
}
