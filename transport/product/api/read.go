package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rgit/rgit/storage/object"
)

// ErrNotFound wraps every "no such object, path or ref" (HTTP 404).
var ErrNotFound = errors.New("not found")

func notFound(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotFound, fmt.Sprintf(format, args...))
}

// DefaultBlobCap is the default cap of blob content.
const DefaultBlobCap = 1 << 20

// binarySniff is how much of a raw answer is read ahead to choose its
// content type: what isBinary looks at, and a rune more so that a cut at
// the cap is seen as one.
const binarySniff = DefaultBlobCap + utf8.UTFMax

// reader answers the object-id endpoints over one repository's objects,
// within one answer's budget.
type reader struct {
	objs Objects
	w    *work
	memo *WalkMemo // nil: walks keep nothing across requests
}

func newReader(ctx context.Context, objs Objects, lim Limits) reader {
	return reader{objs: objs, w: newWork(ctx, lim)}
}

// read returns the object, mapping a missing one to ErrNotFound.
func (rd reader) read(id object.ID) (object.Type, []byte, error) {
	t, data, err := rd.objs.ReadObject(id)
	if errors.Is(err, object.ErrNotFound) {
		return 0, nil, notFound("no object %s", id)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", id, err)
	}
	return t, data, nil
}

// sharedReader is an Objects that keeps the objects it is asked for
// again (pack.Set: in the node's delta base cache, bounded in bytes).
type sharedReader interface {
	ReadShared(id object.ID) (object.Type, []byte, error)
}

// readShared is read for the commits and trees a history walk reads
// request after request (lastcommit, ahead-behind): kept across
// requests where objs can keep them. The data must not be modified.
func (rd reader) readShared(id object.ID) (object.Type, []byte, error) {
	sr, ok := rd.objs.(sharedReader)
	if !ok {
		return rd.read(id)
	}
	t, data, err := sr.ReadShared(id)
	if errors.Is(err, object.ErrNotFound) {
		return 0, nil, notFound("no object %s", id)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", id, err)
	}
	return t, data, nil
}

// peelTo follows tags (and a commit, when want is a tree) until it reaches
// an object of type want.
func (rd reader) peelTo(id object.ID, want object.Type) (object.ID, []byte, error) {
	for range 16 { // tag chains are short; a cycle cannot hash, but bound it
		t, data, err := rd.read(id)
		if err != nil {
			return id, nil, err
		}
		switch {
		case t == want:
			return id, data, nil
		case t == object.Tag:
			tag, err := object.ParseTag(data)
			if err != nil {
				return id, nil, fmt.Errorf("tag %s: %w", id, err)
			}
			id = tag.Object
		case t == object.Commit && want == object.Tree:
			c, err := object.ParseCommit(data)
			if err != nil {
				return id, nil, fmt.Errorf("commit %s: %w", id, err)
			}
			id = c.Tree
		default:
			return id, nil, notFound("%s is a %s, not a %s", id, t, want)
		}
	}
	return id, nil, notFound("%s: tag chain too long", id)
}

// entry is one tree entry as the API shows it.
type treeEntry struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
	Kind string `json:"kind"`
	OID  string `json:"oid"`
	Size *int64 `json:"size,omitempty"`
}

func kindOf(mode uint32) string {
	switch mode & 0o170000 {
	case object.ModeTree:
		return "tree"
	case object.ModeGitlink:
		return "commit"
	case object.ModeSymlink:
		return "symlink"
	}
	return "blob"
}

// resolve walks sub from the tree of id (a commit, tag or tree) and
// returns the object it names and its mode (ModeTree for the root).
func (rd reader) resolve(id object.ID, sub []string) (object.ID, uint32, error) {
	cur, data, err := rd.peelTo(id, object.Tree)
	if err != nil {
		return cur, 0, err
	}
	mode := uint32(object.ModeTree)
	for i, name := range sub {
		if mode&0o170000 != object.ModeTree {
			return cur, 0, notFound("%s is not a directory", strings.Join(sub[:i], "/"))
		}
		if data == nil {
			if _, data, err = rd.peelTo(cur, object.Tree); err != nil {
				return cur, 0, err
			}
		}
		e, ok, err := rd.findEntry(data, name)
		if err != nil {
			return cur, 0, fmt.Errorf("tree %s: %w", cur, err)
		}
		if !ok {
			return cur, 0, notFound("no %s in %s", strings.Join(sub[:i+1], "/"), id)
		}
		cur, mode, data = e.ID, e.Mode, nil
	}
	return cur, mode, nil
}

// findEntry finds name among tree's entries, counting the entries it
// looks at against the answer's budget.
func (rd reader) findEntry(tree []byte, name string) (object.TreeEntry, bool, error) {
	it := object.NewTreeIter(tree)
	n := 0
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		n++
		if string(e.Name) == name {
			return e, true, rd.w.visit(n)
		}
		if sortsAfter(e.Name, name) {
			break
		}
	}
	if err := rd.w.visit(n); err != nil {
		return object.TreeEntry{}, false, err
	}
	return object.TreeEntry{}, false, it.Err()
}

// sortsAfter reports whether an entry named e comes after any entry
// named name in git's tree order (bytes, a tree's name compared as if
// it ended in "/"), so a search for name can stop at it, as git's own
// lookup (tree-walk.c find_tree_entry) does.
//
//	e "netx", name "net"    after: "netx" > "net/", the latest name sorts
//	e "net.go", name "net"  not: "net.go" < "net/" (a tree net follows)
//	e "ne", name "net"      not
func sortsAfter(e []byte, name string) bool {
	n := min(len(e), len(name))
	if c := strings.Compare(string(e[:n]), name[:n]); c != 0 {
		return c > 0
	}
	return len(e) > n && e[n] > '/'
}

// maxTreeListing bounds the entries of one tree listing: its answer is
// built whole (about 120 bytes of JSON an entry, and as much again while
// it is built). Large hosts cut listings at the same size.
const maxTreeListing = 100_000

// treeData reads the directory at sub of id: its id, content and entry
// count. The entries are counted before any is looked at, so a tree over
// the budget or maxTreeListing is refused for the price of parsing it.
func (rd reader) treeData(id object.ID, sub []string) (object.ID, []byte, int, error) {
	tid, mode, err := rd.resolve(id, sub)
	if err != nil {
		return tid, nil, 0, err
	}
	if mode&0o170000 != object.ModeTree {
		return tid, nil, 0, notFound("%s is not a directory", strings.Join(sub, "/"))
	}
	tid, data, err := rd.peelTo(tid, object.Tree)
	if err != nil {
		return tid, nil, 0, err
	}
	n := 0
	for it := object.NewTreeIter(data); ; n++ {
		if _, ok := it.Next(); !ok {
			break
		}
	}
	if n > maxTreeListing {
		return tid, nil, 0, limitErr("tree has too many entries to list", maxTreeListing, "", "")
	}
	if err := rd.w.visit(n); err != nil {
		if _, ok := asLimit(err); ok {
			return tid, nil, 0, limitErr("tree has too many entries", int64(rd.w.lim.MaxEntries), "", SettingMaxEntries)
		}
		return tid, nil, 0, err
	}
	return tid, data, n, nil
}

// tree lists the tree at sub of id. Submodule entries are listed, never
// followed (their commits live in another repository).
func (rd reader) tree(id object.ID, sub []string) ([]treeEntry, error) {
	tid, data, n, err := rd.treeData(id, sub)
	if err != nil {
		return nil, err
	}
	out := make([]treeEntry, 0, n)
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		en := treeEntry{Name: string(e.Name), Mode: strconv.FormatUint(uint64(e.Mode), 8), Kind: kindOf(e.Mode), OID: e.ID.String()}
		if en.Kind == "blob" {
			_, size, err := rd.objs.ReadHeader(e.ID)
			if err != nil {
				return nil, fmt.Errorf("tree %s entry %q: %w", tid, e.Name, err)
			}
			en.Size = &size
		}
		out = append(out, en)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("tree %s: %w", tid, err)
	}
	return out, nil
}

// blobAt returns the blob id is (no sub) or that sub names inside id.
func (rd reader) blobAt(id object.ID, sub []string) (object.ID, []byte, error) {
	if len(sub) == 0 {
		return rd.peelTo(id, object.Blob)
	}
	bid, mode, err := rd.resolve(id, sub)
	if err != nil {
		return bid, nil, err
	}
	switch mode & 0o170000 {
	case object.ModeTree, object.ModeGitlink:
		return bid, nil, notFound("%s is not a file", strings.Join(sub, "/"))
	}
	_, data, err := rd.peelTo(bid, object.Blob)
	return bid, data, err
}

// openBlobAt opens the blob blobAt names for streaming: its id, size and
// content. Only the trees and tags on the way are read whole, so a raw
// answer costs the same memory however large the file.
func (rd reader) openBlobAt(id object.ID, sub []string) (object.ID, int64, io.ReadCloser, error) {
	bid := id
	if len(sub) > 0 {
		var mode uint32
		var err error
		if bid, mode, err = rd.resolve(id, sub); err != nil {
			return bid, 0, nil, err
		}
		switch mode & 0o170000 {
		case object.ModeTree, object.ModeGitlink:
			return bid, 0, nil, notFound("%s is not a file", strings.Join(sub, "/"))
		}
	}
	for range 16 { // as peelTo
		t, _, err := rd.objs.ReadHeader(bid)
		if errors.Is(err, object.ErrNotFound) {
			return bid, 0, nil, notFound("no object %s", bid)
		}
		if err != nil {
			return bid, 0, nil, fmt.Errorf("object %s: %w", bid, err)
		}
		switch t {
		case object.Blob:
			_, size, rc, err := rd.objs.OpenObject(bid)
			if err != nil {
				return bid, 0, nil, fmt.Errorf("object %s: %w", bid, err)
			}
			return bid, size, rc, nil
		case object.Tag:
			_, data, err := rd.read(bid)
			if err != nil {
				return bid, 0, nil, err
			}
			tag, err := object.ParseTag(data)
			if err != nil {
				return bid, 0, nil, fmt.Errorf("tag %s: %w", bid, err)
			}
			bid = tag.Object
		default:
			return bid, 0, nil, notFound("%s is a %s, not a blob", bid, t)
		}
	}
	return bid, 0, nil, notFound("%s: tag chain too long", bid)
}

// blobAnswer is blob's JSON.
type blobAnswer struct {
	OID       string `json:"oid"`
	Size      int64  `json:"size"`
	Binary    bool   `json:"binary"`
	Truncated bool   `json:"truncated"`
	Content   string `json:"content"`
	// LFS is set when the blob is a Git LFS pointer: the file it stands
	// for is stored with Git LFS (raw serves it).
	LFS *lfsAnswer `json:"lfs,omitempty"`
}

// lfsAnswer is the Git LFS object a pointer names.
type lfsAnswer struct {
	OID  string `json:"oid"`
	Size int64  `json:"size"`
}

func newBlobAnswer(id object.ID, data []byte, limit int) blobAnswer {
	a := blobAnswer{OID: id.String(), Size: int64(len(data)), Binary: isBinary(data)}
	if len(data) > limit {
		data, a.Truncated = data[:limit], true
	}
	if a.Binary {
		a.Content = base64.StdEncoding.EncodeToString(data)
	} else {
		if a.Truncated {
			// Do not cut a UTF-8 sequence in half.
			for len(data) > 0 && !utf8.Valid(data[max(0, len(data)-4):]) {
				data = data[:len(data)-1]
			}
		}
		a.Content = string(data)
	}
	return a
}

// isBinary is git's heuristic (a NUL in the first 8000 bytes), plus
// invalid UTF-8, which JSON could not carry as text.
func isBinary(data []byte) bool {
	if hasNUL(data) {
		return true
	}
	check := data
	if len(check) > DefaultBlobCap {
		check = check[:DefaultBlobCap]
		for len(check) > 0 && !utf8.RuneStart(check[len(check)-1]) {
			check = check[:len(check)-1]
		}
		if len(check) > 0 {
			check = check[:len(check)-1]
		}
	}
	return !utf8.Valid(check)
}

// hasNUL is git's binary test: a NUL in the first 8000 bytes.
func hasNUL(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

// person is an author or committer.
type person struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Time  string `json:"time"` // RFC 3339 in the signature's own zone
}

// commitAnswer is a commit as log, commit and compare show it.
type commitAnswer struct {
	OID       string   `json:"oid"`
	Tree      string   `json:"tree"`
	Parents   []string `json:"parents"`
	Author    person   `json:"author"`
	Committer person   `json:"committer"`
	Message   string   `json:"message"`
}

// parseCommit reads a commit's header and message. Signatures that do not
// parse are shown as they are, with an empty time, rather than failing the
// whole answer: the object passed fsck (or predates it) and is history.
func parseCommit(id object.ID, data []byte) (commitAnswer, error) {
	c := commitAnswer{OID: id.String(), Parents: []string{}}
	header, msg, _ := bytes.Cut(data, []byte("\n\n"))
	c.Message = strings.ToValidUTF8(string(msg), "\uFFFD")
	seenTree := false
	for line := range bytes.SplitSeq(header, []byte("\n")) {
		k, v, _ := bytes.Cut(line, []byte(" "))
		switch string(k) {
		case "tree":
			c.Tree, seenTree = string(v), true
		case "parent":
			c.Parents = append(c.Parents, string(v))
		case "author":
			c.Author = parsePerson(v)
		case "committer":
			c.Committer = parsePerson(v)
		}
	}
	if !seenTree {
		return c, fmt.Errorf("commit %s: %w: no tree", id, object.ErrMalformed)
	}
	return c, nil
}

func parsePerson(v []byte) person {
	sig := object.ParseSignature(v)
	p := person{Name: sig.Name, Email: sig.Email}
	if !sig.When.IsZero() {
		p.Time = sig.When.Format(time.RFC3339)
	}
	return p
}

// commit reads id, peeling tags, as a commit.
func (rd reader) commit(id object.ID) (commitAnswer, object.CommitInfo, error) {
	cid, data, err := rd.peelTo(id, object.Commit)
	if err != nil {
		return commitAnswer{}, object.CommitInfo{}, err
	}
	info, err := object.ParseCommit(data)
	if err != nil {
		return commitAnswer{}, info, fmt.Errorf("commit %s: %w", cid, err)
	}
	a, err := parseCommit(cid, data)
	return a, info, err
}

// log is first-parent history from id, n commits, keeping only commits
// that change sub (compared with their first parent) when sub is set.
// next is where the following page starts (zero at the root). With a
// path filter one page examines at most MaxLogScan commits and
// MaxEntries tree entries: past either it ends early (fewer than n
// commits, even none) with next at the first commit not examined, so a
// client following next still pages through any history. Only a first
// commit that alone is over the entry budget is refused.
func (rd reader) log(id object.ID, n int, sub []string) (out []commitAnswer, next object.ID, err error) {
	out = []commitAnswer{}
	cur := id
	a, info, err := rd.commit(cur)
	if err != nil {
		return nil, object.ID{}, err
	}
	for scanned := 0; ; scanned++ {
		if len(sub) > 0 && scanned == rd.w.lim.MaxLogScan {
			return out, cur, nil
		}
		if err := rd.w.ctx.Err(); err != nil {
			return nil, object.ID{}, err
		}
		var parent, parentTree object.ID
		var pa commitAnswer
		var pinfo object.CommitInfo
		if len(info.Parents) > 0 {
			parent = info.Parents[0]
			pa, pinfo, err = rd.commit(parent)
			switch {
			case errors.Is(err, ErrNotFound):
				// A shallow boundary or missing parent ends history.
				parent = object.ID{}
			case err != nil:
				return nil, object.ID{}, err
			default:
				parentTree = pinfo.Tree
			}
		}
		keep := true
		if len(sub) > 0 {
			keep, err = rd.pathChanged(info.Tree, parentTree, sub)
			if _, over := asLimit(err); over && cur != id {
				return out, cur, nil
			}
			if err != nil {
				return nil, object.ID{}, err
			}
		}
		if keep {
			if len(out) == n {
				return out, cur, nil
			}
			out = append(out, a)
		}
		if parent.IsZero() {
			return out, object.ID{}, nil
		}
		cur, a, info = parent, pa, pinfo
	}
}

// pathChanged reports whether sub names a different object or mode in
// tree a than in tree b (zero: the empty tree). Both paths are walked
// together, and equal subtrees on the way answer at once, as git's tree
// diff prunes them: most commits cost a look at the root trees.
func (rd reader) pathChanged(a, b object.ID, sub []string) (bool, error) {
	ma, mb := uint32(object.ModeTree), uint32(object.ModeTree)
	for _, name := range sub {
		if a == b && ma == mb {
			return false, nil
		}
		var err error
		if a, ma, err = rd.child(a, ma, name); err != nil {
			return false, err
		}
		if b, mb, err = rd.child(b, mb, name); err != nil {
			return false, err
		}
	}
	return a != b || ma != mb, nil
}

// child is the entry name in the directory id (mode its mode); zero when
// id is zero, not a directory, or has no such entry.
func (rd reader) child(id object.ID, mode uint32, name string) (object.ID, uint32, error) {
	if id.IsZero() || mode&0o170000 != object.ModeTree {
		return object.ID{}, 0, nil
	}
	t, data, err := rd.readShared(id)
	if errors.Is(err, ErrNotFound) || err == nil && t != object.Tree {
		return object.ID{}, 0, nil
	}
	if err != nil {
		return object.ID{}, 0, err
	}
	e, ok, err := rd.findEntry(data, name)
	if err != nil || !ok {
		return object.ID{}, 0, err
	}
	return e.ID, e.Mode, nil
}
