package api

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
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

// archiveEntry is one file the archive writers see.
type archiveEntry struct {
	path string
	mode uint32
	data []byte
}

// walkTree calls fn for every blob and symlink under tree, depth first in
// tree order, and for every directory before its contents (data nil).
// Submodules are skipped: their commits live in another repository.
func (rd reader) walkTree(tree object.ID, dir string, fn func(archiveEntry) error) error {
	_, data, err := rd.peelTo(tree, object.Tree)
	if err != nil {
		return err
	}
	it := object.NewTreeIter(data)
	for e, ok := it.Next(); ok; e, ok = it.Next() {
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
		_, blob, err := rd.peelTo(e.ID, object.Blob)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := fn(archiveEntry{path: p, mode: e.Mode, data: blob}); err != nil {
			return err
		}
	}
	return it.Err()
}

// writeTarGz streams the tree as a gzip-compressed tar.
func (rd reader) writeTarGz(w io.Writer, name string, id object.ID) error {
	tree, mtime, err := rd.archiveSource(id)
	if err != nil {
		return err
	}
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	prefix := archivePrefix(name, id)
	hdr := func(e archiveEntry) *tar.Header {
		h := &tar.Header{Name: prefix + e.path, ModTime: mtime, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		switch {
		case e.mode == object.ModeTree:
			h.Typeflag, h.Mode = tar.TypeDir, 0o775
		case e.mode&0o170000 == object.ModeSymlink:
			h.Typeflag, h.Mode, h.Linkname = tar.TypeSymlink, 0o777, string(e.data)
		default:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o664, int64(len(e.data))
			if e.mode&0o111 != 0 {
				h.Mode = 0o775
			}
		}
		return h
	}
	if err := tw.WriteHeader(hdr(archiveEntry{path: "", mode: object.ModeTree})); err != nil {
		return err
	}
	err = rd.walkTree(tree, "", func(e archiveEntry) error {
		h := hdr(e)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write(e.data)
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

// writeZip streams the tree as a zip (deflated; symlinks as link entries).
func (rd reader) writeZip(w io.Writer, name string, id object.ID) error {
	tree, mtime, err := rd.archiveSource(id)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	prefix := archivePrefix(name, id)
	if _, err := zw.CreateHeader(&zip.FileHeader{Name: prefix, Modified: mtime}); err != nil {
		return err
	}
	err = rd.walkTree(tree, "", func(e archiveEntry) error {
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
		_, err = fw.Write(e.data)
		return err
	})
	if err != nil {
		return err
	}
	return zw.Close()
}
