package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"

	"github.com/go-git/go-git/v6/plumbing/filemode"
	fdiff "github.com/go-git/go-git/v6/plumbing/format/diff"
	gogit "github.com/go-git/go-git/v6/plumbing/object"

	"github.com/rgit/rgit/storage/object"
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
	Files     []fileChange `json:"files"`
	Diff      string       `json:"diff"`
	Truncated bool         `json:"truncated"`
}

// diffTrees diffs two trees (from zero: the empty tree). Which files
// changed is rgit's own walk (it reads only the subtrees whose ids
// differ; go-git's tree diff decodes every subtree of each directory it
// enters, 16x git's time on the large fixture); rename detection, the
// line diff and the unified patch text are go-git's, over rgit's packs.
// The text stops at limit bytes (Truncated); binary files are named,
// never shown.
func (rd reader) diffTrees(ctx context.Context, from, to object.ID, limit int) (diffAnswer, error) {
	st := goStore(rd)
	// Every change entry needs a *Tree to read its blobs through; any tree
	// of this store will do, so the new root carries them all.
	carrier, err := gogit.GetTree(st, toGo(to))
	if err != nil {
		return diffAnswer{}, fmt.Errorf("tree %s: %w", to, err)
	}
	var changes gogit.Changes
	if err := rd.treeChanges(from, to, "", carrier, &changes); err != nil {
		return diffAnswer{}, fmt.Errorf("diff %s..%s: %w", from, to, err)
	}
	sort.SliceStable(changes, func(i, j int) bool { return changePath(changes[i]) < changePath(changes[j]) })
	if changes, err = gogit.DetectRenames(changes, gogit.DefaultDiffTreeOptions); err != nil {
		return diffAnswer{}, fmt.Errorf("renames %s..%s: %w", from, to, err)
	}
	patch, err := changes.PatchContext(ctx)
	if err != nil {
		return diffAnswer{}, fmt.Errorf("patch %s..%s: %w", from, to, err)
	}
	out := diffAnswer{Files: []fileChange{}}
	for _, fp := range patch.FilePatches() {
		out.Files = append(out.Files, fileOf(fp))
	}
	w := &capWriter{limit: limit}
	if err := fdiff.NewUnifiedEncoder(w, fdiff.DefaultContextLines).Encode(patch); err != nil {
		if !errors.Is(err, errCapped) {
			return diffAnswer{}, fmt.Errorf("encode patch %s..%s: %w", from, to, err)
		}
		out.Truncated = true
	}
	out.Diff = string(bytes.ToValidUTF8(w.buf.Bytes(), []byte("\uFFFD")))
	return out, nil
}

func changePath(c *gogit.Change) string {
	if c.To.Name != "" {
		return c.To.Name
	}
	return c.From.Name
}

// treeEntries reads a tree's entries by name; zero is the empty tree.
func (rd reader) treeEntries(id object.ID) ([]object.TreeEntry, error) {
	if id.IsZero() {
		return nil, nil
	}
	_, data, err := rd.peelTo(id, object.Tree)
	if err != nil {
		return nil, err
	}
	var out []object.TreeEntry
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		out = append(out, e)
	}
	return out, it.Err()
}

// treeChanges appends to out the file-level changes from tree a to tree
// b under dir, descending only into subtrees whose ids differ. Entries
// are merged in git's tree order, where a directory sorts as its name
// plus "/": a path that changed between file and directory is then two
// entries, a removal and an addition, as git shows it.
func (rd reader) treeChanges(a, b object.ID, dir string, carrier *gogit.Tree, out *gogit.Changes) error {
	if a == b {
		return nil
	}
	ea, err := rd.treeEntries(a)
	if err != nil {
		return err
	}
	eb, err := rd.treeEntries(b)
	if err != nil {
		return err
	}
	for len(ea) > 0 || len(eb) > 0 {
		var c int
		switch {
		case len(ea) == 0:
			c = 1
		case len(eb) == 0:
			c = -1
		default:
			c = treeOrder(ea[0], eb[0])
		}
		switch {
		case c < 0:
			err = rd.side(ea[0], dir, carrier, out, true)
			ea = ea[1:]
		case c > 0:
			err = rd.side(eb[0], dir, carrier, out, false)
			eb = eb[1:]
		default:
			o, e := ea[0], eb[0]
			ea, eb = ea[1:], eb[1:]
			switch {
			case o.IsTree():
				err = rd.treeChanges(o.ID, e.ID, path.Join(dir, string(e.Name)), carrier, out)
			case o.ID != e.ID || o.Mode != e.Mode:
				*out = append(*out, &gogit.Change{From: changeEntry(o, dir, carrier), To: changeEntry(e, dir, carrier)})
			}
		}
		if err != nil {
			return err
		}
	}
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
func (rd reader) side(e object.TreeEntry, dir string, carrier *gogit.Tree, out *gogit.Changes, deleted bool) error {
	if e.IsTree() {
		if deleted {
			return rd.treeChanges(e.ID, object.ID{}, path.Join(dir, string(e.Name)), carrier, out)
		}
		return rd.treeChanges(object.ID{}, e.ID, path.Join(dir, string(e.Name)), carrier, out)
	}
	c := &gogit.Change{}
	if deleted {
		c.From = changeEntry(e, dir, carrier)
	} else {
		c.To = changeEntry(e, dir, carrier)
	}
	*out = append(*out, c)
	return nil
}

func changeEntry(e object.TreeEntry, dir string, carrier *gogit.Tree) gogit.ChangeEntry {
	name := string(e.Name)
	return gogit.ChangeEntry{Name: path.Join(dir, name), Tree: carrier,
		TreeEntry: gogit.TreeEntry{Name: name, Mode: filemode.FileMode(e.Mode), Hash: toGo(e.ID)}}
}

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
		n := bytes.Count([]byte(c.Content()), []byte("\n"))
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

// capWriter keeps the first limit bytes and then fails, so the encoder
// stops producing text nobody will see.
type capWriter struct {
	buf   bytes.Buffer
	limit int
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.limit - w.buf.Len()
	if len(p) > room {
		w.buf.Write(p[:max(room, 0)])
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

func (rd reader) commitWithDiff(ctx context.Context, id object.ID, limit int) (commitDiff, error) {
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
	d, err := rd.diffTrees(ctx, parentTree, info.Tree, limit)
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

func (rd reader) compare(ctx context.Context, base, head object.ID, limit int) (compareAnswer, error) {
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
		if _, ok := fromBase.set[id]; !ok {
			aheadIDs = append(aheadIDs, id)
		}
	}
	out.Ahead = len(aheadIDs)
	for _, id := range fromBase.order {
		if _, ok := fromHead.set[id]; !ok {
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
	// The merge base (git merge-base, via go-git); the diff is what head
	// adds to it, as a three-dot compare shows.
	st := goStore(rd)
	gb, err := gogit.GetCommit(st, toGo(baseID))
	if err != nil {
		return out, fmt.Errorf("commit %s: %w", baseID, err)
	}
	gh, err := gogit.GetCommit(st, toGo(headID))
	if err != nil {
		return out, fmt.Errorf("commit %s: %w", headID, err)
	}
	bases, err := gh.MergeBase(gb)
	if err != nil {
		return out, fmt.Errorf("merge base of %s and %s: %w", baseID, headID, err)
	}
	fromTree := binfo.Tree
	if len(bases) > 0 {
		out.MergeBase = bases[0].Hash.String()
		id, _ := fromGo(bases[0].TreeHash)
		fromTree = id
	}
	out.diffAnswer, err = rd.diffTrees(ctx, fromTree, hinfo.Tree, limit)
	return out, err
}

// history is the commits reachable from a tip, in visit order.
type history struct {
	set   map[object.ID]struct{}
	order []object.ID
}

// ancestors collects every commit reachable from tip (breadth first over
// all parents), up to maxCompareWalk; a missing parent ends that line.
func (rd reader) ancestors(tip object.ID) (history, error) {
	h := history{set: map[object.ID]struct{}{tip: {}}, order: []object.ID{tip}}
	for i := 0; i < len(h.order); i++ {
		if len(h.order) > maxCompareWalk {
			return h, fmt.Errorf("%w: history over %d commits", errTooLarge, maxCompareWalk)
		}
		t, data, err := rd.objs.ReadObject(h.order[i])
		if errors.Is(err, object.ErrNotFound) {
			continue
		}
		if err != nil {
			return h, err
		}
		if t != object.Commit {
			return h, notFound("%s is not a commit", h.order[i])
		}
		info, err := object.ParseCommit(data)
		if err != nil {
			return h, fmt.Errorf("commit %s: %w", h.order[i], err)
		}
		for _, p := range info.Parents {
			if _, ok := h.set[p]; !ok {
				h.set[p] = struct{}{}
				h.order = append(h.order, p)
			}
		}
	}
	return h, nil
}

// errTooLarge: the answer would cost more than the API allows (HTTP 422).
var errTooLarge = errors.New("too large")
