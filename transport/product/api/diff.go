package api

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v6/plumbing"
	"github.com/go-git/go-git/v6/plumbing/filemode"
	fdiff "github.com/go-git/go-git/v6/plumbing/format/diff"
	gogit "github.com/go-git/go-git/v6/plumbing/object"
	"github.com/go-git/go-git/v6/utils/diff"
	dmp "github.com/sergi/go-diff/diffmatchpatch"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// fileChange is one file of a diff.
type fileChange struct {
	Path      string `json:"path"`
	OldPath   string `json:"old_path,omitempty"`
	Status    string `json:"status"` // added, modified, deleted, renamed
	Binary    bool   `json:"binary"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
}

// diffAnswer is the diff part of commit and compare.
type diffAnswer struct {
	Files []fileChange `json:"files"`
	Diff  string       `json:"diff"`
	cutShort
}

// cutShort says whether an answer a limit cut short (diffs, blame) is
// incomplete, and why.
type cutShort struct {
	// Truncated: the answer is incomplete, for the reason (a limit, named
	// with its setting) in TruncatedReason.
	Truncated       bool   `json:"truncated"`
	TruncatedReason string `json:"truncated_reason,omitempty"`
	// limit is the first limit that cut it; timedOut: the time budget
	// cut it, so another try may get further, and the answer is not
	// stored for others.
	limit    *gitproto.LimitError
	timedOut bool
}

// truncate records the first reason the answer is incomplete.
func (d *cutShort) truncate(why *gitproto.LimitError) {
	if !d.Truncated {
		d.Truncated, d.TruncatedReason, d.limit = true, why.Error(), why
	}
}

// diffTrees diffs two trees (from zero: the empty tree) within the
// answer's budget; every limit it meets cuts the answer short
// (Truncated) rather than failing it. Which files changed is rgit's own
// walk (diffWalk); rename detection is go-git's, over rgit's packs; the
// line diffs are go-git's diff with a deadline, and its unified encoder
// writes the text. Binary files, and files over MaxDiffFileBytes, are
// named, never shown.
func (rd reader) diffTrees(from, to object.ID) (diffAnswer, error) {
	out := diffAnswer{Files: []fileChange{}}
	lim := rd.w.lim
	walk := rd.newDiffWalk()
	err := walk.trees(from, to, "")
	if le, ok := asLimit(err); ok {
		out.truncate(le)
	} else if err != nil {
		return out, fmt.Errorf("diff %s..%s: %w", from, to, err)
	}
	changes := walk.out
	sort.SliceStable(changes, func(i, j int) bool { return changePath(changes[i]) < changePath(changes[j]) })
	if changes, err = rd.detectRenames(changes); err != nil {
		return out, fmt.Errorf("renames %s..%s: %w", from, to, err)
	}
	p := patcher{rd: rd, deadline: time.Now().Add(lim.DiffTimeout), memo: map[[2]object.ID]lineDiff{}}
	text := &capWriter{limit: lim.MaxDiffBytes}
	enc := fdiff.NewUnifiedEncoder(text, fdiff.DefaultContextLines)
	for _, c := range changes {
		fp, done, err := p.filePatch(c)
		if err != nil {
			return out, fmt.Errorf("diff %s..%s: %s: %w", from, to, changePath(c), err)
		}
		out.Files = append(out.Files, fileOf(fp))
		if !done {
			out.truncate(limitErr("line diffs took too long", lim.DiffTimeout.Milliseconds(), "ms", SettingDiffTimeout))
			out.timedOut = true
			continue
		}
		if text.full {
			continue
		}
		if err := enc.Encode(onePatch{fp}); err != nil {
			if !errors.Is(err, errCapped) {
				return out, fmt.Errorf("encode patch %s..%s: %w", from, to, err)
			}
			out.truncate(limitErr("diff text too long", int64(lim.MaxDiffBytes), "bytes", SettingMaxDiffBytes))
		}
	}
	out.Diff = string(bytes.ToValidUTF8(text.buf.Bytes(), []byte("\uFFFD")))
	return out, nil
}

func changePath(c *gogit.Change) string {
	if c.To.Name != "" {
		return c.To.Name
	}
	return c.From.Name
}

// carrierTree is an empty go-git tree over st. Every change entry needs a
// *Tree to read its blobs through (rename detection does), and any tree
// of the store will do; an empty one costs nothing to decode, where the
// root of a huge tree would be decoded whole.
func carrierTree(st goStore) *gogit.Tree {
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.TreeObject)
	t, _ := gogit.DecodeTree(st, o)
	return t
}

// diffWalk collects the file-level changes between two trees, visiting
// entries within the answer's budget and at most MaxDiffFiles changes.
type diffWalk struct {
	rd      reader
	carrier *gogit.Tree
	out     gogit.Changes
	// same holds the pairs of different trees found to hold no change
	// (the same entries written differently, e.g. zero-padded modes), so
	// that repeated pairs are not expanded again.
	same map[[2]object.ID]bool
	// onlyAdded, when set, is the one added file the walk collects, and
	// files changed in place are left out too: blame's rename search
	// needs only deletions and its file, and need not read the
	// directories a commit added elsewhere.
	onlyAdded string
}

func (rd reader) newDiffWalk() *diffWalk {
	return &diffWalk{rd: rd, carrier: carrierTree(goStore{rd.objs}), same: map[[2]object.ID]bool{}}
}

// detectRenames pairs deleted and added files of changes as renames, as
// git does by default, within the answer's rename limits.
func (rd reader) detectRenames(changes gogit.Changes) (gogit.Changes, error) {
	opts := &gogit.DiffTreeOptions{DetectRenames: true, RenameScore: renameScore,
		RenameLimit: uint(rd.w.lim.RenameLimit), OnlyExactRenames: !rd.contentRenamesFit(changes)}
	return gogit.DetectRenames(changes, opts)
}

// entryIter reads a tree's entries one at a time (zero: the empty tree),
// counting each against the answer's budget.
type entryIter struct {
	w   *work
	it  *object.TreeIter
	cur object.TreeEntry
	ok  bool
	err error
}

func (rd reader) entries(id object.ID) (*entryIter, error) {
	var data []byte
	if !id.IsZero() {
		var err error
		if _, data, err = rd.peelTo(id, object.Tree); err != nil {
			return nil, err
		}
	}
	e := &entryIter{w: rd.w, it: object.NewTreeIter(data)}
	e.next()
	return e, e.err
}

func (e *entryIter) next() {
	if e.cur, e.ok = e.it.Next(); e.ok {
		e.err = e.w.visit(1)
	} else {
		e.err = e.it.Err()
	}
}

// pairEntries walks the entries of trees a and b (zero: the empty tree)
// together in git's tree order, where a directory sorts as its name plus
// "/", and calls f with each name's entry on either side (nil where a
// side lacks it): a path that is a file on one side and a directory on
// the other is then two calls, a removal and an addition, as git shows
// it. The first error, f's or the budget's, ends the walk.
func (rd reader) pairEntries(a, b object.ID, f func(ea, eb *object.TreeEntry) error) error {
	ea, err := rd.entries(a)
	if err != nil {
		return err
	}
	eb, err := rd.entries(b)
	if err != nil {
		return err
	}
	for ea.ok || eb.ok {
		var c int
		switch {
		case !ea.ok:
			c = 1
		case !eb.ok:
			c = -1
		default:
			c = treeOrder(ea.cur, eb.cur)
		}
		switch {
		case c < 0:
			if err = f(&ea.cur, nil); err == nil {
				ea.next()
			}
		case c > 0:
			if err = f(nil, &eb.cur); err == nil {
				eb.next()
			}
		default:
			if err = f(&ea.cur, &eb.cur); err == nil {
				ea.next()
			}
			if err == nil && ea.err == nil {
				eb.next()
			}
		}
		if err = cmp.Or(err, ea.err, eb.err); err != nil {
			return err
		}
	}
	return nil
}

// trees appends the changes from tree a to tree b under dir, descending
// only into subtrees whose ids differ (pairEntries: a path that changed
// between file and directory is a removal and an addition).
func (d *diffWalk) trees(a, b object.ID, dir string) error {
	pair := [2]object.ID{a, b}
	if a == b || d.same[pair] {
		return nil
	}
	before := len(d.out)
	err := d.rd.pairEntries(a, b, func(o, e *object.TreeEntry) error {
		switch {
		case e == nil:
			return d.side(*o, dir, true)
		case o == nil:
			return d.side(*e, dir, false)
		case o.IsTree():
			return d.trees(o.ID, e.ID, path.Join(dir, string(e.Name)))
		case (o.ID != e.ID || o.Mode != e.Mode) && d.onlyAdded == "":
			return d.add(&gogit.Change{From: changeEntry(*o, dir, d.carrier), To: changeEntry(*e, dir, d.carrier)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(d.out) == before {
		d.same[pair] = true
	}
	return nil
}

// add records a change, or stops the walk at MaxDiffFiles.
func (d *diffWalk) add(c *gogit.Change) error {
	if n := d.rd.w.lim.MaxDiffFiles; len(d.out) >= n {
		return limitErr("diff has too many changed files", int64(n), "", SettingMaxDiffFiles)
	}
	d.out = append(d.out, c)
	return nil
}

// treeOrder compares entries as git sorts a tree: by name, a directory's
// name followed by "/".
func treeOrder(a, b object.TreeEntry) int {
	if c := bytes.Compare(a.Name, b.Name); c != 0 && !bytes.HasPrefix(a.Name, b.Name) && !bytes.HasPrefix(b.Name, a.Name) {
		return c
	}
	ka, kb := orderKey(a), orderKey(b)
	return bytes.Compare(ka, kb)
}

func orderKey(e object.TreeEntry) []byte {
	if e.IsTree() {
		return append(e.Name[:len(e.Name):len(e.Name)], '/')
	}
	return e.Name
}

// side records e (recursively, for a tree) as deleted or added.
func (d *diffWalk) side(e object.TreeEntry, dir string, deleted bool) error {
	if !deleted && d.onlyAdded != "" {
		if p := path.Join(dir, string(e.Name)); p != d.onlyAdded && !(e.IsTree() && strings.HasPrefix(d.onlyAdded, p+"/")) {
			return nil
		}
	}
	if e.IsTree() {
		if deleted {
			return d.trees(e.ID, object.ID{}, path.Join(dir, string(e.Name)))
		}
		return d.trees(object.ID{}, e.ID, path.Join(dir, string(e.Name)))
	}
	c := &gogit.Change{}
	if deleted {
		c.From = changeEntry(e, dir, d.carrier)
	} else {
		c.To = changeEntry(e, dir, d.carrier)
	}
	return d.add(c)
}

func changeEntry(e object.TreeEntry, dir string, carrier *gogit.Tree) gogit.ChangeEntry {
	name := string(e.Name)
	return gogit.ChangeEntry{Name: path.Join(dir, name), Tree: carrier,
		TreeEntry: gogit.TreeEntry{Name: name, Mode: filemode.FileMode(e.Mode), Hash: toGo(e.ID)}}
}

// renameScore is git's default similarity for a rename (50%) as go-git
// scores it.
const renameScore = 60

// maxRenameBytes bounds the file content go-git's rename detection reads.
// It rebuilds a file's similarity index for every pair it compares, so
// the cost is the pairs times the file sizes, not the files.
const maxRenameBytes = 64 << 20

// contentRenamesFit reports whether renames by content may be looked for
// among changes: go-git does so only within RenameLimit files a side,
// and this adds the bytes its comparisons would read, estimated from the
// sizes as go-git pairs files (regular files whose sizes are within its
// score of each other). Otherwise only identical content pairs up.
func (rd reader) contentRenamesFit(changes gogit.Changes) bool {
	var added, deleted []int64
	for _, c := range changes {
		switch {
		case c.From.Name == "" && c.To.TreeEntry.Mode == filemode.Regular:
			added = append(added, 0)
		case c.To.Name == "" && c.From.TreeEntry.Mode == filemode.Regular:
			deleted = append(deleted, 0)
		}
	}
	if len(added) == 0 || len(deleted) == 0 || max(len(added), len(deleted)) > rd.w.lim.RenameLimit {
		return true // go-git looks no further
	}
	added, deleted = added[:0], deleted[:0]
	var total int64
	for _, c := range changes {
		var e gogit.ChangeEntry
		switch {
		case c.From.Name == "" && c.To.TreeEntry.Mode == filemode.Regular:
			e = c.To
		case c.To.Name == "" && c.From.TreeEntry.Mode == filemode.Regular:
			e = c.From
		default:
			continue
		}
		id, _ := fromGo(e.TreeEntry.Hash)
		_, size, err := rd.objs.ReadHeader(id)
		if err != nil {
			return false
		}
		total += size
		if c.From.Name == "" {
			added = append(added, size+1)
		} else {
			deleted = append(deleted, size+1)
		}
	}
	for _, src := range deleted {
		for _, dst := range added {
			if min(src, dst)*100/max(src, dst) >= renameScore {
				if total += dst; total > maxRenameBytes {
					return false
				}
			}
		}
	}
	return total <= maxRenameBytes
}

// patcher computes the line diffs of one answer within its time budget.
// Identical pairs of files (a tree repeating one file in many places)
// are diffed once.
type patcher struct {
	rd        reader
	deadline  time.Time
	memo      map[[2]object.ID]lineDiff
	memoBytes int
}

// lineDiff is the line diff of a pair of files.
type lineDiff struct {
	chunks []fdiff.Chunk
	binary bool
}

// maxMemoBytes bounds the content the line-diff memo keeps alive.
const maxMemoBytes = 16 << 20

// binarySniffGit is how much of a file git looks at for a NUL.
const binarySniffGit = 8000

// filePatch is c's file patch; done is false when the time budget was
// spent first (the file is then listed with no lines).
func (p *patcher) filePatch(c *gogit.Change) (fp *filePatch, done bool, err error) {
	fp = &filePatch{}
	var fromID, toID object.ID
	if c.From.Name != "" {
		fp.from = patchFile{c.From}
		fromID, _ = fromGo(c.From.TreeEntry.Hash)
	}
	if c.To.Name != "" {
		fp.to = patchFile{c.To}
		toID, _ = fromGo(c.To.TreeEntry.Hash)
	}
	if fromID == toID {
		return fp, true, nil // a mode change or an exact rename: no lines
	}
	if err := p.rd.w.ctx.Err(); err != nil {
		return fp, false, err
	}
	if !time.Now().Before(p.deadline) {
		return fp, false, nil
	}
	pair := [2]object.ID{fromID, toID}
	if d, ok := p.memo[pair]; ok {
		fp.chunks, fp.binary = d.chunks, d.binary
		return fp, true, nil
	}
	from, fromBin, err := p.content(c.From)
	if err != nil {
		return fp, false, err
	}
	to, toBin, err := p.content(c.To)
	if err != nil {
		return fp, false, err
	}
	if fp.binary = fromBin || toBin; !fp.binary {
		for _, d := range diff.DoWithTimeout(from, to, time.Until(p.deadline)) {
			fp.chunks = append(fp.chunks, chunk{d.Text, operationOf(d.Type)})
		}
	}
	if p.memoBytes += len(from) + len(to); p.memoBytes <= maxMemoBytes {
		p.memo[pair] = lineDiff{fp.chunks, fp.binary}
	}
	return fp, true, nil
}

// content is a side's text as the line diff sees it ("" for none): a
// submodule as git shows it, a file's bytes. Binary is a NUL in the
// first 8000 bytes, as git decides, or a file over MaxDiffFileBytes.
func (p *patcher) content(e gogit.ChangeEntry) (text string, binary bool, err error) {
	if e.Name == "" {
		return "", false, nil
	}
	if e.TreeEntry.Mode == filemode.Submodule {
		return "Subproject commit " + e.TreeEntry.Hash.String() + "\n", false, nil
	}
	id, _ := fromGo(e.TreeEntry.Hash)
	_, size, err := p.rd.objs.ReadHeader(id)
	if err != nil {
		return "", false, fmt.Errorf("object %s: %w", id, err)
	}
	if size > p.rd.w.lim.MaxDiffFileBytes {
		return "", true, nil
	}
	_, data, err := p.rd.read(id)
	if err != nil {
		return "", false, err
	}
	if bytes.IndexByte(data[:min(len(data), binarySniffGit)], 0) >= 0 {
		return "", true, nil
	}
	return string(data), false, nil
}

func operationOf(t dmp.Operation) fdiff.Operation {
	switch t {
	case dmp.DiffDelete:
		return fdiff.Delete
	case dmp.DiffInsert:
		return fdiff.Add
	}
	return fdiff.Equal
}

// filePatch, patchFile, chunk and onePatch are go-git's patch interfaces
// (plumbing/format/diff) over the line diffs computed here.
type filePatch struct {
	from, to patchFile // zero Name: absent
	binary   bool
	chunks   []fdiff.Chunk
}

func (f *filePatch) IsBinary() bool        { return f.binary }
func (f *filePatch) Chunks() []fdiff.Chunk { return f.chunks }
func (f *filePatch) Files() (from, to fdiff.File) {
	if f.from.Name != "" {
		from = f.from
	}
	if f.to.Name != "" {
		to = f.to
	}
	return from, to
}

type patchFile struct{ gogit.ChangeEntry }

func (f patchFile) Hash() plumbing.Hash     { return f.TreeEntry.Hash }
func (f patchFile) Mode() filemode.FileMode { return f.TreeEntry.Mode }
func (f patchFile) Path() string            { return f.Name }

type chunk struct {
	content string
	op      fdiff.Operation
}

func (c chunk) Content() string       { return c.content }
func (c chunk) Type() fdiff.Operation { return c.op }

type onePatch struct{ fp fdiff.FilePatch }

func (p onePatch) FilePatches() []fdiff.FilePatch { return []fdiff.FilePatch{p.fp} }
func (onePatch) Message() string                  { return "" }

func fileOf(fp fdiff.FilePatch) fileChange {
	from, to := fp.Files()
	var f fileChange
	switch {
	case from == nil:
		f.Path, f.Status = to.Path(), "added"
	case to == nil:
		f.Path, f.Status = from.Path(), "deleted"
	case from.Path() != to.Path():
		f.Path, f.OldPath, f.Status = to.Path(), from.Path(), "renamed"
	default:
		f.Path, f.Status = to.Path(), "modified"
	}
	f.Binary = fp.IsBinary()
	for _, c := range fp.Chunks() {
		n := strings.Count(c.Content(), "\n")
		if s := c.Content(); len(s) > 0 && s[len(s)-1] != '\n' {
			n++
		}
		switch c.Type() {
		case fdiff.Add:
			f.Additions += n
		case fdiff.Delete:
			f.Deletions += n
		}
	}
	return f
}

var errCapped = errors.New("diff over the size cap")

// capWriter keeps the first limit bytes and then fails (full), so the
// encoder stops producing text nobody will see.
type capWriter struct {
	buf   bytes.Buffer
	limit int
	full  bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.limit - w.buf.Len()
	if len(p) > room {
		w.buf.Write(p[:max(room, 0)])
		w.full = true
		return max(room, 0), errCapped
	}
	return w.buf.Write(p)
}

// commitDiff is commit's JSON: the commit, its files and its diff against
// the first parent (the empty tree for a root commit).
type commitDiff struct {
	commitAnswer
	diffAnswer
}

func (rd reader) commitWithDiff(id object.ID) (commitDiff, error) {
	c, info, err := rd.commit(id)
	if err != nil {
		return commitDiff{}, err
	}
	var parentTree object.ID
	if len(info.Parents) > 0 {
		_, pinfo, err := rd.commit(info.Parents[0])
		if err != nil {
			return commitDiff{}, fmt.Errorf("parent of %s: %w", c.OID, err)
		}
		parentTree = pinfo.Tree
	}
	d, err := rd.diffTrees(parentTree, info.Tree)
	return commitDiff{commitAnswer: c, diffAnswer: d}, err
}

// Bounds of compare.
const (
	maxCompareCommits = 250    // commits listed
	maxCompareWalk    = 100000 // commits visited per side
)

// compareAnswer is compare's JSON.
type compareAnswer struct {
	Base      string         `json:"base"`
	Head      string         `json:"head"`
	MergeBase string         `json:"merge_base,omitempty"`
	Ahead     int            `json:"ahead"`
	Behind    int            `json:"behind"`
	Commits   []commitAnswer `json:"commits"` // ahead commits, newest first, at most 250
	diffAnswer
}

func (rd reader) compare(base, head object.ID) (compareAnswer, error) {
	out := compareAnswer{Commits: []commitAnswer{}}
	bc, binfo, err := rd.commit(base)
	if err != nil {
		return out, err
	}
	hc, hinfo, err := rd.commit(head)
	if err != nil {
		return out, err
	}
	out.Base, out.Head = bc.OID, hc.OID
	baseID, _ := object.ParseHex(bc.OID)
	headID, _ := object.ParseHex(hc.OID)
	fromBase, err := rd.ancestors(baseID)
	if err != nil {
		return out, err
	}
	fromHead, err := rd.ancestors(headID)
	if err != nil {
		return out, err
	}
	var aheadIDs []object.ID
	for _, id := range fromHead.order {
		if _, ok := fromBase.parents[id]; !ok {
			aheadIDs = append(aheadIDs, id)
		}
	}
	out.Ahead = len(aheadIDs)
	for _, id := range fromBase.order {
		if _, ok := fromHead.parents[id]; !ok {
			out.Behind++
		}
	}
	for _, id := range aheadIDs[:min(len(aheadIDs), maxCompareCommits)] {
		c, _, err := rd.commit(id)
		if err != nil {
			return out, err
		}
		out.Commits = append(out.Commits, c)
	}
	// The diff is what head adds to the merge base, as a three-dot
	// compare shows; with no common history, to base.
	fromTree := binfo.Tree
	if bases := mergeBases(fromBase, fromHead); len(bases) > 0 {
		out.MergeBase = bases[0].String()
		_, info, err := rd.commit(bases[0])
		if err != nil {
			return out, fmt.Errorf("merge base %s: %w", bases[0], err)
		}
		fromTree = info.Tree
	}
	out.diffAnswer, err = rd.diffTrees(fromTree, hinfo.Tree)
	return out, err
}

// history is the commits reachable from a tip, in visit order, with the
// parents of each (none for a commit that is missing).
type history struct {
	parents map[object.ID][]object.ID
	order   []object.ID
}

// ancestors collects every commit reachable from tip (breadth first over
// all parents), up to maxCompareWalk; a missing parent ends that line.
func (rd reader) ancestors(tip object.ID) (history, error) {
	h := history{parents: map[object.ID][]object.ID{tip: nil}, order: []object.ID{tip}}
	for i := 0; i < len(h.order); i++ {
		if len(h.order) > maxCompareWalk {
			return h, limitErr("compare walks too many commits", maxCompareWalk, "", "")
		}
		if err := rd.w.ctx.Err(); err != nil {
			return h, err
		}
		id := h.order[i]
		t, data, err := rd.objs.ReadObject(id)
		if errors.Is(err, object.ErrNotFound) {
			continue
		}
		if err != nil {
			return h, err
		}
		if t != object.Commit {
			return h, notFound("%s is not a commit", id)
		}
		info, err := object.ParseCommit(data)
		if err != nil {
			return h, fmt.Errorf("commit %s: %w", id, err)
		}
		h.parents[id] = info.Parents
		for _, p := range info.Parents {
			if _, ok := h.parents[p]; !ok {
				h.parents[p] = nil
				h.order = append(h.order, p)
			}
		}
	}
	return h, nil
}

// mergeBases are the best common ancestors of two histories, as git
// merge-base --all finds them: the commits in both that are not an
// ancestor of another commit in both, in head's visit order. Every
// ancestor of a common commit is common, so one walk down from the
// common commits' parents marks all that are not best; it reads nothing,
// and visits each common commit once.
func mergeBases(base, head history) []object.ID {
	var common []object.ID
	for _, id := range head.order {
		if _, ok := base.parents[id]; ok {
			common = append(common, id)
		}
	}
	below := map[object.ID]bool{}
	var stack []object.ID
	for _, id := range common {
		stack = append(stack, head.parents[id]...)
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if below[id] {
			continue
		}
		below[id] = true
		stack = append(stack, head.parents[id]...)
	}
	var out []object.ID
	for _, id := range common {
		if !below[id] {
			out = append(out, id)
		}
	}
	return out
}
