package gitproto

// A Backend over a real bare repository through git plumbing, used to drive
// UploadPack/ReceivePack with the real git client. Test-sized: it favours
// simple, obviously-right computations over speed.

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/testkit/gitrun"
	"github.com/rgit/rgit/transport/wire/pktline"
)

type gitRepo struct{ dir string }

// gitEnv is the environment of every git command these tests run.
func gitEnv() []string { return gitIsolated.Environ() }

var gitIsolated = gitrun.Env{Ident: gitrun.Fixed("T", "t@example.com", "")}

// git runs a git command in the repository with optional stdin.
func (r *gitRepo) git(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	out, err := gitIsolated.Output(ctx, "", stdin, append([]string{"--git-dir", r.dir}, args...)...)
	return string(out), err
}

func (r *gitRepo) Snapshot(ctx context.Context) (RefSnapshot, error) {
	var snap RefSnapshot
	out, err := r.git(ctx, nil, "for-each-ref", "--format=%(objectname) %(refname) %(*objectname)")
	if err != nil {
		return snap, err
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		ref := Ref{Name: f[1], ID: object.MustID(f[0])}
		if len(f) == 3 {
			ref.Peeled = object.MustID(f[2])
		}
		snap.Refs = append(snap.Refs, ref)
	}
	head, err := r.git(ctx, nil, "symbolic-ref", "HEAD")
	if err != nil {
		return snap, err
	}
	snap.Head = strings.TrimSpace(head)
	return snap, nil
}

func (r *gitRepo) HasCommit(ctx context.Context, id object.ID) bool {
	_, err := r.git(ctx, nil, "cat-file", "-e", id.String())
	return err == nil
}

func (r *gitRepo) CheckWants(ctx context.Context, snap RefSnapshot, wants []object.ID) error {
	out, err := r.git(ctx, nil, "rev-list", "--objects", "--all")
	if err != nil {
		return err
	}
	reach := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if len(l) >= 40 {
			reach[l[:40]] = true
		}
	}
	for _, w := range wants {
		if !reach[w.String()] {
			return &NotOurRefError{ID: w}
		}
	}
	return nil
}

func (r *gitRepo) OkToGiveUp(ctx context.Context, wants, common []object.ID) bool {
	for _, w := range wants {
		ok := false
		for _, c := range common {
			if _, err := r.git(ctx, nil, "merge-base", "--is-ancestor", c.String(), w.String()); err == nil {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// commitGraph is every commit of the repository with parents and
// committer time.
type commitGraph struct {
	parents map[string][]string
	time    map[string]int64
}

func (r *gitRepo) graph(ctx context.Context) (*commitGraph, error) {
	out, err := r.git(ctx, nil, "log", "--all", "--format=%H %ct %P")
	if err != nil {
		return nil, err
	}
	g := &commitGraph{parents: map[string][]string{}, time: map[string]int64{}}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		g.time[f[0]], _ = strconv.ParseInt(f[1], 10, 64)
		g.parents[f[0]] = f[2:]
	}
	return g, nil
}

// walk returns commits reachable from starts, not descending below stop
// commits (which are included) or into excluded ones.
func (g *commitGraph) walk(starts []string, stop, exclude map[string]bool) map[string]bool {
	seen := map[string]bool{}
	queue := append([]string(nil), starts...)
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if seen[c] || exclude[c] {
			continue
		}
		if _, ok := g.parents[c]; !ok {
			continue
		}
		seen[c] = true
		if !stop[c] {
			queue = append(queue, g.parents[c]...)
		}
	}
	return seen
}

type gitPlan struct {
	r                  *gitRepo
	shallow, unshallow []object.ID
	packArgs           []string
	stdin              string
	closed             bool
}

func (p *gitPlan) Shallow() []object.ID   { return p.shallow }
func (p *gitPlan) Unshallow() []object.ID { return p.unshallow }
func (p *gitPlan) Close() error           { p.closed = true; return nil }

func (p *gitPlan) WritePack(ctx context.Context, w io.Writer, progress io.Writer) error {
	args := append([]string{"--git-dir", p.r.dir, "pack-objects", "--stdout"}, p.packArgs...)
	if progress != nil {
		args = append(args, "--progress")
	}
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = gitEnv()
	cmd.Stdin = strings.NewReader(p.stdin)
	cmd.Stdout = w
	var errb bytes.Buffer
	if progress != nil {
		cmd.Stderr = progress
	} else {
		cmd.Stderr = &errb
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pack-objects: %w: %s", err, errb.String())
	}
	return nil
}

func ids(in []object.ID) []string {
	s := make([]string, len(in))
	for i, id := range in {
		s[i] = id.String()
	}
	return s
}

func (r *gitRepo) PlanFetch(ctx context.Context, req FetchRequest) (FetchPlan, error) {
	p := &gitPlan{r: r}
	if !req.Deepen() && len(req.ClientShallow) == 0 {
		p.packArgs = []string{"--revs"}
		if req.Thin {
			p.packArgs = append(p.packArgs, "--thin")
		}
		if req.OfsDelta {
			p.packArgs = append(p.packArgs, "--delta-base-offset")
		}
		if req.IncludeTag {
			p.packArgs = append(p.packArgs, "--include-tag")
		}
		if req.Filter != "" {
			p.packArgs = append(p.packArgs, "--filter="+req.Filter)
		}
		p.stdin = strings.Join(ids(req.Wants), "\n") + "\n--not\n" + strings.Join(ids(req.Haves), "\n") + "\n"
		return p, nil
	}
	return r.planShallow(ctx, req, p)
}

// planShallow computes the shallow boundary and the exact object list the
// way upload-pack's deepen does, then packs that list.
func (r *gitRepo) planShallow(ctx context.Context, req FetchRequest, p *gitPlan) (FetchPlan, error) {
	g, err := r.graph(ctx)
	if err != nil {
		return nil, err
	}
	clientShallow := map[string]bool{}
	for _, s := range ids(req.ClientShallow) {
		clientShallow[s] = true
	}
	wants := ids(req.Wants)
	var included map[string]bool
	boundary := map[string]bool{}
	switch {
	case req.Depth > 0:
		starts, depth := wants, req.Depth
		if req.DeepenRelative {
			starts, depth = nil, req.Depth+1
			for s := range clientShallow {
				starts = append(starts, s)
			}
		}
		included = map[string]bool{}
		level := starts
		for d := 1; d <= depth && len(level) > 0; d++ {
			var next []string
			for _, c := range level {
				if included[c] {
					continue
				}
				if _, ok := g.parents[c]; !ok {
					continue
				}
				included[c] = true
				if d == depth && len(g.parents[c]) > 0 {
					boundary[c] = true
				} else {
					next = append(next, g.parents[c]...)
				}
			}
			level = next
		}
		if req.DeepenRelative {
			// The commits above the old boundary come along too.
			for c := range g.walk(wants, clientShallow, nil) {
				included[c] = true
			}
		}
	default:
		exclude := map[string]bool{}
		if len(req.DeepenNot) > 0 {
			exclude = g.walk(ids(req.DeepenNot), nil, nil)
		}
		for c, t := range g.time {
			if req.DeepenSince != 0 && t < req.DeepenSince {
				exclude[c] = true
			}
		}
		if !req.Deepen() {
			// Shallow client, no deepening: keep its boundary.
			included = g.walk(wants, clientShallow, nil)
			for c := range clientShallow {
				if included[c] {
					boundary[c] = true
				}
			}
			break
		}
		included = g.walk(wants, nil, exclude)
		for c := range included {
			for _, par := range g.parents[c] {
				if !included[par] {
					boundary[c] = true
				}
			}
		}
	}
	for c := range boundary {
		if !clientShallow[c] {
			p.shallow = append(p.shallow, object.MustID(c))
		}
	}
	for c := range clientShallow {
		if included[c] && !boundary[c] {
			p.unshallow = append(p.unshallow, object.MustID(c))
		}
	}
	has := g.walk(ids(req.Haves), clientShallow, nil)
	var send, have []string
	for c := range included {
		if !has[c] {
			send = append(send, c)
		}
	}
	for c := range has {
		have = append(have, c)
	}
	list, err := r.objectList(ctx, send, have)
	if err != nil {
		return nil, err
	}
	// Non-commit wants (tags) and, with include-tag, tags of sent commits.
	sent := map[string]bool{}
	for _, c := range send {
		sent[c] = true
	}
	for _, w := range wants {
		if _, ok := g.parents[w]; !ok {
			list = append(list, w)
		}
	}
	if req.IncludeTag {
		for _, ref := range req.Snapshot.Refs {
			if !ref.Peeled.IsZero() && sent[ref.Peeled.String()] {
				list = append(list, ref.ID.String())
			}
		}
	}
	if req.OfsDelta {
		p.packArgs = append(p.packArgs, "--delta-base-offset")
	}
	p.stdin = strings.Join(list, "\n") + "\n"
	return p, nil
}

// objectList returns the commits in send with their trees' objects, minus
// the tree objects of the commits in have.
func (r *gitRepo) objectList(ctx context.Context, send, have []string) ([]string, error) {
	if len(send) == 0 {
		return nil, nil
	}
	objs := func(commits []string) (map[string]bool, []string, error) {
		m := map[string]bool{}
		var order []string
		if len(commits) == 0 {
			return m, nil, nil
		}
		out, err := r.git(ctx, strings.NewReader(strings.Join(commits, "\n")+"\n"), "rev-list", "--objects", "--no-walk", "--stdin")
		if err != nil {
			return nil, nil, err
		}
		for _, l := range strings.Split(out, "\n") {
			if len(l) >= 40 && !m[l[:40]] {
				m[l[:40]] = true
				order = append(order, l[:40])
			}
		}
		return m, order, nil
	}
	_, sendOrder, err := objs(send)
	if err != nil {
		return nil, err
	}
	haveSet, _, err := objs(have)
	if err != nil {
		return nil, err
	}
	var list []string
	for _, o := range sendOrder {
		if !haveSet[o] {
			list = append(list, o)
		}
	}
	return list, nil
}

// pushLog is where Push records push options, for tests to inspect.
func (r *gitRepo) pushLog() string { return filepath.Join(r.dir, "rgit-push-options") }

func (r *gitRepo) Push(ctx context.Context, req PushRequest) (PushResult, error) {
	var res PushResult
	if len(req.Options) > 0 {
		if err := os.WriteFile(r.pushLog(), []byte(strings.Join(req.Options, "\n")+"\n"), 0o644); err != nil {
			return res, err
		}
	}
	if req.Pack != nil {
		res.UnpackErr = r.unpack(ctx, req.Pack, req.Progress)
	}
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return res, err
	}
	current := map[string]object.ID{}
	for _, ref := range snap.Refs {
		current[ref.Name] = ref.ID
	}
	res.Results = make([]CommandResult, len(req.Commands))
	failed := false
	for i, c := range req.Commands {
		res.Results[i].Name = c.Name
		switch {
		case res.UnpackErr != nil:
			res.Results[i].Err = "unpacker error"
		case c.New.IsZero() && c.Name == snap.Head:
			res.Results[i].Err = "deny deleting current branch"
		case !c.New.IsZero() && !r.HasCommit(ctx, c.New):
			res.Results[i].Err = "missing necessary objects"
		case current[c.Name] != c.Old:
			res.Results[i].Err = "stale info"
		}
		failed = failed || res.Results[i].Err != ""
	}
	line := func(c Command) string {
		if c.New.IsZero() {
			return fmt.Sprintf("delete %s %s\n", c.Name, c.Old)
		}
		return fmt.Sprintf("update %s %s %s\n", c.Name, c.New, c.Old)
	}
	if req.Atomic {
		if failed {
			for i := range res.Results {
				if res.Results[i].Err == "" {
					res.Results[i].Err = "atomic push failed"
				}
			}
			return res, nil
		}
		var in strings.Builder
		for _, c := range req.Commands {
			in.WriteString(line(c))
		}
		if _, err := r.git(ctx, strings.NewReader(in.String()), "update-ref", "--stdin"); err != nil {
			for i := range res.Results {
				res.Results[i].Err = "failed to update ref"
			}
		}
		return res, nil
	}
	for i, c := range req.Commands {
		if res.Results[i].Err != "" {
			continue
		}
		if _, err := r.git(ctx, strings.NewReader(line(c)), "update-ref", "--stdin"); err != nil {
			res.Results[i].Err = "failed to update ref"
		}
	}
	return res, nil
}

// unpack reads exactly one pack from pack into a temp file and indexes it.
func (r *gitRepo) unpack(ctx context.Context, pack io.Reader, progress io.Writer) error {
	f, err := os.CreateTemp(r.dir, "incoming-*.pack")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := copyPack(f, pack)
	if err != nil {
		return fmt.Errorf("read pack: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	meter := pktline.NewProgress(progress, "Receiving objects", n)
	meter.Set(n)
	meter.Done()
	if _, err := r.git(ctx, f, "index-pack", "--stdin", "--fix-thin"); err != nil {
		return errors.New("index-pack abnormal exit")
	}
	return nil
}

// teeReader records every byte read, byte-wise reads included, so that
// zlib (which uses ReadByte when offered) consumes no more than the
// compressed stream.
type teeReader struct {
	r *bufio.Reader
	w *bufio.Writer
}

func (t *teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.w.Write(p[:n])
	return n, err
}

func (t *teeReader) ReadByte() (byte, error) {
	b, err := t.r.ReadByte()
	if err == nil {
		t.w.WriteByte(b)
	}
	return b, err
}

// copyPack copies one pack stream from r to w, stopping at its trailer,
// and returns the object count.
func copyPack(w io.Writer, r io.Reader) (uint64, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	bw := bufio.NewWriter(w)
	t := &teeReader{r: br, w: bw}
	var hdr [12]byte
	if _, err := io.ReadFull(t, hdr[:]); err != nil {
		return 0, err
	}
	if string(hdr[:4]) != "PACK" {
		return 0, errors.New("bad pack signature")
	}
	n := binary.BigEndian.Uint32(hdr[8:])
	for i := uint32(0); i < n; i++ {
		c, err := t.ReadByte()
		if err != nil {
			return 0, err
		}
		typ := c >> 4 & 7
		for c&0x80 != 0 {
			if c, err = t.ReadByte(); err != nil {
				return 0, err
			}
		}
		switch typ {
		case 6: // ofs-delta: varint offset
			for {
				if c, err = t.ReadByte(); err != nil {
					return 0, err
				}
				if c&0x80 == 0 {
					break
				}
			}
		case 7: // ref-delta: base id
			if _, err := io.ReadFull(t, make([]byte, 20)); err != nil {
				return 0, err
			}
		}
		zr, err := zlib.NewReader(t)
		if err != nil {
			return 0, err
		}
		if _, err := io.Copy(io.Discard, zr); err != nil {
			return 0, err
		}
	}
	if _, err := io.ReadFull(t, make([]byte, 20)); err != nil {
		return 0, err
	}
	return uint64(n), bw.Flush()
}
