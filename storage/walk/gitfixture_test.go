package walk

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
)

// testRepo is a real git repository built with the git CLI, with fixed
// identities and committer times so that results are deterministic.
type testRepo struct {
	tb  testing.TB
	dir string
	now int64
	g   *gitrun.Repo
}

const fixtureEpoch = 1700000000

func newTestRepo(tb testing.TB) *testRepo {
	tb.Helper()
	g := gitrun.Scratch(tb, gitrun.Env{Ident: gitrun.Ident{
		Author: gitrun.Sig{Name: "A", Email: "a@example.com"}, Committer: gitrun.Sig{Name: "C", Email: "c@example.com"}}})
	return &testRepo{tb: tb, dir: g.Dir, now: fixtureEpoch, g: g}
}

// run runs git with stdin and returns stdout.
func (r *testRepo) run(stdin []byte, args ...string) ([]byte, error) {
	r.g.At(r.now)
	res := r.g.Try(stdin, args...)
	if !res.OK() {
		return []byte(res.Stdout), errors.New(res.String())
	}
	return []byte(res.Stdout), nil
}

func (r *testRepo) git(args ...string) string {
	r.tb.Helper()
	out, err := r.run(nil, args...)
	if err != nil {
		r.tb.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func (r *testRepo) write(path, content string) {
	r.tb.Helper()
	r.g.Write(path, content)
}

// commit stages everything and commits, advancing the clock a minute.
func (r *testRepo) commit(msg string) object.ID {
	r.tb.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	r.now += 60
	return r.rev("HEAD")
}

func (r *testRepo) rev(name string) object.ID {
	r.tb.Helper()
	return object.MustID(r.git("rev-parse", name))
}

func (r *testRepo) revs(names ...string) []object.ID {
	var ids []object.ID
	for _, n := range names {
		ids = append(ids, r.rev(n))
	}
	return ids
}

// memReader holds every object of a repository in memory, read once with
// `git cat-file --batch-all-objects --batch`. It counts reads.
type memReader struct {
	objs  map[object.ID]memObj
	reads atomic.Int64
}

type memObj struct {
	typ  object.Type
	data []byte
}

func (r *testRepo) reader() *memReader {
	r.tb.Helper()
	out, err := r.run(nil, "cat-file", "--batch-all-objects", "--batch", "--unordered")
	if err != nil {
		r.tb.Fatal(err)
	}
	m, err := parseBatch(out)
	if err != nil {
		r.tb.Fatal(err)
	}
	return m
}

func parseBatch(out []byte) (*memReader, error) {
	m := &memReader{objs: make(map[object.ID]memObj)}
	br := bufio.NewReader(bytes.NewReader(out))
	for {
		hdr, err := br.ReadString('\n')
		if err == io.EOF {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		f := strings.Fields(hdr)
		if len(f) != 3 {
			return nil, fmt.Errorf("bad batch header %q", hdr)
		}
		id, err := object.ParseID(f[0])
		if err != nil {
			return nil, err
		}
		typ, err := object.ParseType(f[1])
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, err
		}
		data := make([]byte, n+1)
		if _, err := io.ReadFull(br, data); err != nil {
			return nil, err
		}
		m.objs[id] = memObj{typ, data[:n]}
	}
}

func (m *memReader) ReadObject(id object.ID) (object.Type, []byte, error) {
	m.reads.Add(1)
	o, ok := m.objs[id]
	if !ok {
		return object.Invalid, nil, fmt.Errorf("object %s: %w", id, object.ErrNotFound)
	}
	return o.typ, o.data, nil
}

func (m *memReader) ReadHeader(id object.ID) (object.Type, int64, error) {
	o, ok := m.objs[id]
	if !ok {
		return object.Invalid, 0, fmt.Errorf("object %s: %w", id, object.ErrNotFound)
	}
	return o.typ, int64(len(o.data)), nil
}

// plainReader hides ReadHeader, to exercise the fallback paths.
type plainReader struct{ r object.Reader }

func (p plainReader) ReadObject(id object.ID) (object.Type, []byte, error) { return p.r.ReadObject(id) }

// revList runs `git rev-list --objects --no-object-names args...`.
func (r *testRepo) revList(args ...string) []object.ID {
	r.tb.Helper()
	out := r.git(append([]string{"rev-list", "--objects", "--no-object-names"}, args...)...)
	return parseIDs(r.tb, out)
}

func parseIDs(tb testing.TB, s string) []object.ID {
	tb.Helper()
	var ids []object.ID
	for _, line := range strings.Fields(s) {
		id, err := object.ParseID(strings.TrimPrefix(line, "~"))
		if err != nil {
			tb.Fatalf("parse %q: %v", line, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// uploadReq is a protocol v0 fetch request sent to `git upload-pack`.
type uploadReq struct {
	wants, haves, shallow []object.ID
	depth                 int
	since                 int64
	deepenNot             []string // ref names, as the protocol sends them
	relative              bool
	filter                string
	includeTag            bool
}

// uploadResult is what git's upload-pack answered.
type uploadResult struct {
	objects            []object.ID
	shallow, unshallow []object.ID
}

// uploadPack runs git's own upload-pack on the repository with req and
// returns the objects in the pack it sends and its shallow-info lines:
// the reference our Objects is compared with.
func (r *testRepo) uploadPack(req uploadReq) uploadResult {
	r.tb.Helper()
	var b bytes.Buffer
	pkt := func(s string) { fmt.Fprintf(&b, "%04x%s", len(s)+4, s) }
	caps := " ofs-delta shallow deepen-since deepen-not no-progress"
	if req.relative {
		caps += " deepen-relative"
	}
	if req.includeTag {
		caps += " include-tag"
	}
	if req.filter != "" {
		caps += " filter"
	}
	for i, w := range req.wants {
		if i == 0 {
			pkt("want " + w.String() + caps + "\n")
		} else {
			pkt("want " + w.String() + "\n")
		}
	}
	for _, s := range req.shallow {
		pkt("shallow " + s.String() + "\n")
	}
	if req.depth > 0 {
		pkt(fmt.Sprintf("deepen %d\n", req.depth))
	}
	if req.since != 0 {
		pkt(fmt.Sprintf("deepen-since %d\n", req.since))
	}
	for _, n := range req.deepenNot {
		pkt("deepen-not " + n + "\n")
	}
	if req.filter != "" {
		pkt("filter " + req.filter + "\n")
	}
	b.WriteString("0000")
	for _, h := range req.haves {
		pkt("have " + h.String() + "\n")
	}
	pkt("done\n")
	out, err := r.run(b.Bytes(), "-c", "uploadpack.allowFilter=true", "upload-pack", "--stateless-rpc", r.dir)
	if err != nil {
		r.tb.Fatal(err)
	}
	var res uploadResult
	for !bytes.HasPrefix(out, []byte("PACK")) {
		if len(out) < 4 {
			r.tb.Fatalf("upload-pack: no pack in response")
		}
		n, err := strconv.ParseUint(string(out[:4]), 16, 16)
		if err != nil {
			r.tb.Fatalf("upload-pack: bad pkt-line %q", out[:4])
		}
		if n == 0 {
			out = out[4:]
			continue
		}
		line := strings.TrimSpace(string(out[4:n]))
		out = out[n:]
		if s, ok := strings.CutPrefix(line, "shallow "); ok {
			res.shallow = append(res.shallow, object.MustID(s))
		} else if s, ok := strings.CutPrefix(line, "unshallow "); ok {
			res.unshallow = append(res.unshallow, object.MustID(s))
		}
	}
	dir := r.tb.TempDir()
	packPath := filepath.Join(dir, "x.pack")
	if err := os.WriteFile(packPath, out, 0o644); err != nil {
		r.tb.Fatal(err)
	}
	r.git("index-pack", "-o", filepath.Join(dir, "x.idx"), packPath)
	idx, err := os.ReadFile(filepath.Join(dir, "x.idx"))
	if err != nil {
		r.tb.Fatal(err)
	}
	show, err := r.run(idx, "show-index")
	if err != nil {
		r.tb.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(show)), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			res.objects = append(res.objects, object.MustID(f[1]))
		}
	}
	return res
}

// sameSet reports the differences between two id lists taken as sets.
func sameSet(got, want []object.ID) error {
	g := map[object.ID]bool{}
	for _, id := range got {
		if g[id] {
			return fmt.Errorf("duplicate %s in result", id)
		}
		g[id] = true
	}
	w := map[object.ID]bool{}
	for _, id := range want {
		w[id] = true
	}
	var extra, missing []string
	for id := range g {
		if !w[id] {
			extra = append(extra, id.String())
		}
	}
	for id := range w {
		if !g[id] {
			missing = append(missing, id.String())
		}
	}
	if len(extra)+len(missing) == 0 {
		return nil
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return fmt.Errorf("got %d want %d; extra %v; missing %v", len(g), len(w), extra, missing)
}
