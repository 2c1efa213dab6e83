package lfs

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/repo"
)

// ContentTTL is how long the presigned URL a raw answer redirects to is
// good for.
const ContentTTL = 5 * time.Minute

// Content serves the files Git LFS pointers stand for, for the read API's
// raw answers (transport/product/api). Access is the caller's: it has decided
// that the client may read the repository.
type Content struct {
	objects objects
	metrics *Metrics
	log     *zap.Logger
}

// NewContent serves the LFS objects of st; m may be nil.
func NewContent(st objstore.Store, m *Metrics, log *zap.Logger) *Content {
	if log == nil {
		log = zap.NewNop()
	}
	return &Content{objects: newObjects(st), metrics: m, log: log}
}

// ServeRaw answers a raw request for the file p stands for in owner/name
// (canonical spelling): on a presigning store a redirect (302) to a
// presigned GET valid for ContentTTL, never cached; else the bytes,
// streamed, with the content type typeOf gives their head. It returns
// false, having written nothing, when the store does not hold the object
// whole (not uploaded yet): the caller serves the pointer instead.
func (c *Content) ServeRaw(w http.ResponseWriter, r *http.Request, rp names.Repo, p Pointer, typeOf func(head []byte) string) (bool, error) {
	ok, err := c.objects.present(r.Context(), rp, p.OID, p.Size)
	if err != nil || !ok {
		return false, err
	}
	h := w.Header()
	if c.objects.pre != nil {
		u, err := c.objects.pre.PresignGet(r.Context(), repo.LFSKey(rp, p.OID), ContentTTL)
		if err != nil {
			return false, err
		}
		h.Set("Cache-Control", "private, no-store")
		h.Del("ETag")
		http.Redirect(w, r, u.URL, http.StatusFound)
		return true, nil
	}
	rc, size, err := c.objects.open(r.Context(), rp, p.OID, 0)
	if errors.Is(err, ErrMissing) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer rc.Close()
	head := make([]byte, min(size, 8000))
	if _, err := io.ReadFull(rc, head); err != nil {
		return false, err
	}
	h.Set("Content-Type", typeOf(head))
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	n, _ := w.Write(head)
	m, err := objstore.Send(w, rc)
	c.metrics.nodeBytes(opDownload, int64(n)+m)
	if err != nil && r.Context().Err() == nil {
		c.log.Warn("raw answer of a Git LFS file cut short", zap.String("oid", p.OID), zap.Error(err))
	}
	return true, nil
}
