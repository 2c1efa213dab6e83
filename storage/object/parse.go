package object

import (
	"bytes"
	"strconv"
)

// CommitInfo is what reachability needs from a commit: its tree, parents
// and committer time. Parsing stops after the committer line.
type CommitInfo struct {
	Tree          ID
	Parents       []ID
	CommitterTime int64 // seconds since the epoch
}

// ParseCommit extracts the tree, parents and committer time of a commit.
// It checks only what it reads; fsck does the full validation.
func ParseCommit(data []byte) (CommitInfo, error) {
	var c CommitInfo
	line, rest, ok := nextLine(data)
	if !ok || !bytes.HasPrefix(line, []byte("tree ")) {
		return c, malformed("commit: missing tree line")
	}
	id, ok := hexID(line[5:])
	if !ok || len(line) != 5+2*IDSize {
		return c, malformed("commit: bad tree id")
	}
	c.Tree = id
	for {
		line, rest, ok = nextLine(rest)
		if !ok {
			return c, malformed("commit: missing committer line")
		}
		if bytes.HasPrefix(line, []byte("parent ")) {
			id, ok := hexID(line[7:])
			if !ok || len(line) != 7+2*IDSize {
				return c, malformed("commit: bad parent id")
			}
			c.Parents = append(c.Parents, id)
			continue
		}
		if bytes.HasPrefix(line, []byte("committer ")) {
			t, err := signatureTime(line[10:])
			if err != nil {
				return c, malformed("commit: %v", err)
			}
			c.CommitterTime = t
			return c, nil
		}
		if len(line) == 0 {
			return c, malformed("commit: missing committer line")
		}
	}
}

// signatureTime returns the timestamp of "Name <email> 1234567890 +0000".
func signatureTime(sig []byte) (int64, error) {
	gt := bytes.LastIndexByte(sig, '>')
	if gt < 0 {
		return 0, malformed("signature without email")
	}
	f := bytes.Fields(sig[gt+1:])
	if len(f) == 0 {
		return 0, malformed("signature without time")
	}
	t, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0, malformed("signature time %q", f[0])
	}
	return t, nil
}

// TagInfo is what reachability needs from an annotated tag.
type TagInfo struct {
	Object     ID
	ObjectType Type
	Name       []byte
}

// ParseTag extracts the target, target type and name of an annotated tag.
func ParseTag(data []byte) (TagInfo, error) {
	var t TagInfo
	line, rest, ok := nextLine(data)
	if !ok || !bytes.HasPrefix(line, []byte("object ")) {
		return t, malformed("tag: missing object line")
	}
	id, ok := hexID(line[7:])
	if !ok || len(line) != 7+2*IDSize {
		return t, malformed("tag: bad object id")
	}
	t.Object = id
	line, rest, ok = nextLine(rest)
	if !ok || !bytes.HasPrefix(line, []byte("type ")) {
		return t, malformed("tag: missing type line")
	}
	typ, err := ParseType(string(line[5:]))
	if err != nil {
		return t, malformed("tag: %v", err)
	}
	t.ObjectType = typ
	line, _, ok = nextLine(rest)
	if !ok || !bytes.HasPrefix(line, []byte("tag ")) {
		return t, malformed("tag: missing tag line")
	}
	t.Name = line[4:]
	return t, nil
}

// TreeEntry is one entry of a tree object. Name aliases the tree's bytes.
type TreeEntry struct {
	Mode    uint32
	RawMode []byte // the mode digits as stored, for fsck's zero-padding check
	Name    []byte
	ID      ID
}

// Git file modes as stored in trees.
const (
	ModeTree       = 0o40000
	ModeBlob       = 0o100644
	ModeExecutable = 0o100755
	ModeSymlink    = 0o120000
	ModeGitlink    = 0o160000
)

// IsTree reports whether the entry is a subdirectory.
func (e TreeEntry) IsTree() bool { return e.Mode&0o170000 == ModeTree }

// IsGitlink reports whether the entry is a submodule commit.
func (e TreeEntry) IsGitlink() bool { return e.Mode&0o170000 == ModeGitlink }

// TreeIter walks the entries of a tree object without allocating.
type TreeIter struct {
	data []byte
	err  error
}

// NewTreeIter returns an iterator over the tree's raw content.
func NewTreeIter(data []byte) *TreeIter { return &TreeIter{data: data} }

// Next returns the next entry; ok is false at the end or on error.
func (it *TreeIter) Next() (e TreeEntry, ok bool) {
	if len(it.data) == 0 || it.err != nil {
		return e, false
	}
	sp := bytes.IndexByte(it.data, ' ')
	if sp <= 0 {
		it.err = malformed("tree: bad mode")
		return e, false
	}
	var mode uint32
	for _, c := range it.data[:sp] {
		if c < '0' || c > '7' {
			it.err = malformed("tree: bad mode %q", it.data[:sp])
			return e, false
		}
		mode = mode<<3 | uint32(c-'0')
		if mode > 0o7777777 {
			it.err = malformed("tree: mode too large")
			return e, false
		}
	}
	rest := it.data[sp+1:]
	nul := bytes.IndexByte(rest, 0)
	if nul < 0 || len(rest) < nul+1+IDSize {
		it.err = malformed("tree: truncated entry")
		return e, false
	}
	e.Mode = mode
	e.RawMode = it.data[:sp]
	e.Name = rest[:nul]
	copy(e.ID[:], rest[nul+1:nul+1+IDSize])
	it.data = rest[nul+1+IDSize:]
	return e, true
}

// Err returns the first parse error, if any.
func (it *TreeIter) Err() error { return it.err }
