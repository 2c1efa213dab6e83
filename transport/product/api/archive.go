package api

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/rgit/rgit/storage/object"
)

// archivePrefix is the archive's top-level directory: stable for a given
// object id, so the same request always yields the same bytes.
func archivePrefix(name string, id object.ID) string {
	return name + "-" + id.String()[:12] + "/"
}

// archiveSource resolves what an archive of id holds: the tree and the
// modification time of every entry (the commit's committer time, as git
// archive does; the epoch for a bare tree).
func (rd reader) archiveSource(id object.ID) (tree object.ID, mtime time.Time, err error) {
	mtime = time.Unix(0, 0).UTC()
	if cid, data, err := rd.peelTo(id, object.Commit); err == nil {
		info, err := object.ParseCommit(data)
		if err != nil {
			return tree, mtime, fmt.Errorf("commit %s: %w", cid, err)
		}
		return info.Tree, time.Unix(info.CommitterTime, 0).UTC(), nil
	}
	tree, _, err = rd.peelTo(id, object.Tree)
	return tree, mtime, err
}

// archiveSize sizes the archive of tree before its first byte is
// written: its entries (every entry under it, submodules included) and
// file bytes. Sizes are memoised by tree id, so a tree that repeats a few
// subtrees a million times costs its few distinct trees. Sizing stops
// as soon as a total passes its limit; archiveVerdict then refuses it.
func (rd reader) archiveSize(tree object.ID) (treeSize, error) {
	s, err := rd.sizeTree(tree, map[object.ID]treeSize{})
	if _, over := asLimit(err); over {
		// Distinct entries past the budget: expanded, they are more.
		return treeSize{entries: int64(rd.w.lim.MaxEntries) + 1}, nil
	}
	return s, err
}

func (rd reader) sizeTree(tree object.ID, memo map[object.ID]treeSize) (treeSize, error) {
	if s, ok := memo[tree]; ok {
		return s, nil
	}
	_, data, err := rd.peelTo(tree, object.Tree)
	if err != nil {
		return treeSize{}, err
	}
	var total treeSize
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if err := rd.w.visit(1); err != nil {
			return total, err
		}
		one := treeSize{entries: 1}
		switch e.Mode & 0o170000 {
		case object.ModeGitlink:
		case object.ModeTree:
			sub, err := rd.sizeTree(e.ID, memo)
			if err != nil {
				return total, err
			}
			one.entries += sub.entries
			one.bytes = sub.bytes
		default:
			_, size, err := rd.objs.ReadHeader(e.ID)
			if errors.Is(err, object.ErrNotFound) {
				return total, notFound("no object %s", e.ID)
			}
			if err != nil {
				return total, fmt.Errorf("object %s: %w", e.ID, err)
			}
			one.bytes = size
		}
		var within bool
		if total, within = total.add(one, rd.w.lim); !within {
			return total, nil
		}
	}
	if err := it.Err(); err != nil {
		return total, fmt.Errorf("tree %s: %w", tree, err)
	}
	memo[tree] = total
	return total, nil
}

// openArchive resolves and sizes the archive of id: its tree and times,
// or the limit it is over. Within the limits, the walk that writes it
// may visit every entry it holds on top of what sizing visited.
func (rd reader) openArchive(id object.ID) (tree object.ID, mtime time.Time, err error) {
	if tree, mtime, err = rd.archiveSource(id); err != nil {
		return tree, mtime, err
	}
	size, err := rd.archiveSize(tree)
	if err != nil {
		return tree, mtime, err
	}
	if err := archiveVerdict(size, rd.w.lim); err != nil {
		return tree, mtime, err
	}
	rd.w.extend(size.entries)
	return tree, mtime, nil
}

// archiveEntry is one file the archive writers see; content streams from
// the pack (a directory has none).
type archiveEntry struct {
	path    string
	mode    uint32
	size    int64
	content io.Reader
}

// maxLinkTarget bounds a symbolic link's target (Linux's PATH_MAX).
const maxLinkTarget = 4096

// walkTree calls fn for every blob and symlink under tree, depth first in
// tree order, and for every directory before its contents (no content).
// Submodules are skipped: their commits live in another repository.
func (rd reader) walkTree(tree object.ID, dir string, fn func(archiveEntry) error) error {
	_, data, err := rd.peelTo(tree, object.Tree)
	if err != nil {
		return err
	}
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
		if err := rd.w.visit(1); err != nil {
			return err
		}
		p := path.Join(dir, string(e.Name))
		switch e.Mode & 0o170000 {
		case object.ModeGitlink:
			continue
		case object.ModeTree:
			if err := fn(archiveEntry{path: p + "/", mode: object.ModeTree}); err != nil {
				return err
			}
			if err := rd.walkTree(e.ID, p, fn); err != nil {
				return err
			}
			continue
		}
		if err := rd.withBlob(e, p, fn); err != nil {
			return err
		}
	}
	return it.Err()
}

// withBlob calls fn with the file e at p, its content streaming from the
// pack.
func (rd reader) withBlob(e object.TreeEntry, p string, fn func(archiveEntry) error) error {
	t, size, rc, err := rd.objs.OpenObject(e.ID)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer rc.Close()
	if t != object.Blob {
		return fmt.Errorf("%s: %s is a %s, not a blob", p, e.ID, t)
	}
	if e.Mode&0o170000 == object.ModeSymlink && size > maxLinkTarget {
		return fmt.Errorf("%s: symbolic link target of %d bytes", p, size)
	}
	return fn(archiveEntry{path: p, mode: e.Mode, size: size, content: rc})
}

// writeTarGz streams tree (of id, for the name) as a gzip-compressed
// tar.
func (rd reader) writeTarGz(w io.Writer, name string, id, tree object.ID, mtime time.Time) error {
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	prefix := archivePrefix(name, id)
	hdr := func(e archiveEntry) *tar.Header {
		h := &tar.Header{Name: prefix + e.path, ModTime: mtime, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		switch {
		case e.mode == object.ModeTree:
			h.Typeflag, h.Mode = tar.TypeDir, 0o775
		case e.mode&0o170000 == object.ModeSymlink:
			h.Typeflag, h.Mode = tar.TypeSymlink, 0o777
		default:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o664, e.size
			if e.mode&0o111 != 0 {
				h.Mode = 0o775
			}
		}
		return h
	}
	if err := tw.WriteHeader(hdr(archiveEntry{path: "", mode: object.ModeTree})); err != nil {
		return err
	}
	err := rd.walkTree(tree, "", func(e archiveEntry) error {
		h := hdr(e)
		if h.Typeflag == tar.TypeSymlink {
			target, err := io.ReadAll(e.content)
			if err != nil {
				return fmt.Errorf("%s: %w", e.path, err)
			}
			h.Linkname = string(target)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			_, err := io.Copy(tw, e.content)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// writeZip streams tree (of id, for the name) as a zip (deflated;
// symlinks as link entries).
func (rd reader) writeZip(w io.Writer, name string, id, tree object.ID, mtime time.Time) error {
	zw := zip.NewWriter(w)
	prefix := archivePrefix(name, id)
	if _, err := zw.CreateHeader(&zip.FileHeader{Name: prefix, Modified: mtime}); err != nil {
		return err
	}
	err := rd.walkTree(tree, "", func(e archiveEntry) error {
		fh := &zip.FileHeader{Name: prefix + e.path, Modified: mtime}
		switch {
		case e.mode == object.ModeTree:
			fh.SetMode(0o775 | fs.ModeDir)
			_, err := zw.CreateHeader(fh)
			return err
		case e.mode&0o170000 == object.ModeSymlink:
			fh.SetMode(0o777 | fs.ModeSymlink)
		case e.mode&0o111 != 0:
			fh.Method = zip.Deflate
			fh.SetMode(0o775)
		default:
			fh.Method = zip.Deflate
			fh.SetMode(0o664)
		}
		fw, err := zw.CreateHeader(fh)
		if err != nil {
			return err
		}
		_, err = io.Copy(fw, e.content)
		return err
	})
	if err != nil {
		return err
	}
	return zw.Close()
}
