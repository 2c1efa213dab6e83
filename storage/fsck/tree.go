package fsck

import (
	"bytes"
	"slices"

	"github.com/rgit/rgit/storage/object"
)

// maxPathnameLen is git's default limit for one tree entry name
// (largePathname).
const maxPathnameLen = 4096

// treeFlags collects per-tree findings; like git, a tree is reported once
// per kind of problem, not once per entry.
type treeFlags struct {
	nullSha1, fullPath, emptyName, dot, dotdot, dotgit bool
	zeroPad, badMode, dups, unsorted, largeName        bool
}

// checkTree mirrors git's fsck_tree.
func (c *Checker) checkTree(r *report, data []byte) {
	var f treeFlags
	var names [][]byte // aliases into data, for the duplicate check
	var prev object.TreeEntry
	havePrev := false
	it := object.NewTreeIter(data)
	for {
		e, ok := it.Next()
		if !ok {
			break
		}
		name := e.Name
		f.nullSha1 = f.nullSha1 || e.ID.IsZero()
		f.fullPath = f.fullPath || bytes.IndexByte(name, '/') >= 0
		f.emptyName = f.emptyName || len(name) == 0
		f.dot = f.dot || string(name) == "."
		f.dotdot = f.dotdot || string(name) == ".."
		f.dotgit = f.dotgit || isDotGit(name)
		f.zeroPad = f.zeroPad || e.RawMode[0] == '0'
		f.largeName = f.largeName || len(name) > maxPathnameLen
		c.checkSpecialFile(r, e, dotGitmodules.is(name))
		// Windows treats '\' as a separator, so each tail after one is a
		// file name there too.
		for tail := name; ; {
			i := bytes.IndexByte(tail, '\\')
			if i < 0 {
				break
			}
			tail = tail[i+1:]
			f.dotgit = f.dotgit || isNTFSDotGit(tail)
			c.checkSpecialFile(r, e, dotGitmodules.isNTFSOnly(tail))
		}
		if isSymlink(e) {
			if dotGitattributes.is(name) {
				r.add(GitattributesSymlink, ".gitattributes is a symlink")
			}
			if dotGitignore.is(name) {
				r.add(GitignoreSymlink, ".gitignore is a symlink")
			}
			if dotMailmap.is(name) {
				r.add(MailmapSymlink, ".mailmap is a symlink")
			}
		}
		switch e.Mode {
		case object.ModeBlob, object.ModeExecutable, object.ModeSymlink, object.ModeTree, object.ModeGitlink:
		default:
			// Includes 100664, which git tolerates only without --strict.
			f.badMode = true
		}
		names = append(names, name)
		if havePrev && !entryLess(prev, e) && !bytes.Equal(prev.Name, name) {
			f.unsorted = true
		}
		prev, havePrev = e, true
	}
	if err := it.Err(); err != nil {
		r.add(BadTree, "cannot be parsed as a tree: %v", err)
		return
	}
	f.dups = hasDuplicates(names)
	f.report(r)
}

// checkSpecialFile handles an entry whose name is .gitmodules (isMod):
// symlinks are rejected, non-blobs cannot be .gitmodules, and blob ids are
// remembered so that their content gets checked.
func (c *Checker) checkSpecialFile(r *report, e object.TreeEntry, isMod bool) {
	if !isMod {
		return
	}
	switch {
	case isSymlink(e):
		r.add(GitmodulesSymlink, ".gitmodules is a symbolic link")
	case e.IsTree() || e.IsGitlink():
		r.add(GitmodulesBlob, "non-blob found at .gitmodules")
	default:
		c.noteGitmodules(e.ID)
	}
}

func (f *treeFlags) report(r *report) {
	for _, x := range []struct {
		on            bool
		check, detail string
	}{
		{f.nullSha1, NullSha1, "contains entries pointing to null sha1"},
		{f.fullPath, FullPathname, "contains full pathnames"},
		{f.emptyName, EmptyName, "contains empty pathname"},
		{f.dot, HasDot, "contains '.'"},
		{f.dotdot, HasDotdot, "contains '..'"},
		{f.dotgit, HasDotgit, "contains '.git'"},
		{f.zeroPad, ZeroPaddedFilemode, "contains zero-padded file modes"},
		{f.badMode, BadFilemode, "contains bad file modes"},
		{f.dups, DuplicateEntries, "contains duplicate file entries"},
		{f.unsorted, TreeNotSorted, "not properly sorted"},
		{f.largeName, LargePathname, "contains excessively large pathname"},
	} {
		if x.on {
			r.add(x.check, "%s", x.detail)
		}
	}
}

// hasDuplicates reports whether two entries share a name, whatever their
// modes. In git order a file "a" and a directory "a" need not be adjacent
// ("a", "a.c", "a/"), so sort by plain name first: O(n log n) on hostile
// trees, and no allocation per entry.
func hasDuplicates(names [][]byte) bool {
	slices.SortFunc(names, bytes.Compare)
	for i := 1; i < len(names); i++ {
		if bytes.Equal(names[i-1], names[i]) {
			return true
		}
	}
	return false
}

// entryLess reports whether a sorts strictly before b in git's tree order,
// which compares a directory name as if it ended in '/'.
func entryLess(a, b object.TreeEntry) bool {
	n := min(len(a.Name), len(b.Name))
	if c := bytes.Compare(a.Name[:n], b.Name[:n]); c != 0 {
		return c < 0
	}
	return sortChar(a, n) < sortChar(b, n)
}

func sortChar(e object.TreeEntry, i int) int {
	switch {
	case i < len(e.Name):
		return int(e.Name[i])
	case e.IsTree():
		return '/'
	default:
		return 0
	}
}

// isSymlink is git's S_ISLNK on the raw mode.
func isSymlink(e object.TreeEntry) bool { return e.Mode&0o170000 == object.ModeSymlink }
