package lfs

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// The locks API (git-lfs docs/api/locking.md). Locks are per repository:
// a request's ref is accepted and not used, as on the large hosts.
type (
	lockJSON struct {
		ID       string     `json:"id"`
		Path     string     `json:"path"`
		LockedAt string     `json:"locked_at"`
		Owner    *lockOwner `json:"owner,omitempty"`
	}
	lockOwner struct {
		Name string `json:"name"`
	}
	createLockRequest struct {
		Path string   `json:"path"`
		Ref  *refSpec `json:"ref,omitempty"`
	}
	lockAnswer struct {
		Lock    *lockJSON `json:"lock,omitempty"`
		Message string    `json:"message,omitempty"`
	}
	lockList struct {
		Locks      []lockJSON `json:"locks"`
		NextCursor string     `json:"next_cursor,omitempty"`
	}
	verifyLocksRequest struct {
		Cursor string   `json:"cursor,omitempty"`
		Limit  int      `json:"limit,omitempty"`
		Ref    *refSpec `json:"ref,omitempty"`
	}
	verifyLocksAnswer struct {
		Ours       []lockJSON `json:"ours"`
		Theirs     []lockJSON `json:"theirs"`
		NextCursor string     `json:"next_cursor,omitempty"`
	}
	unlockRequest struct {
		Force bool     `json:"force,omitempty"`
		Ref   *refSpec `json:"ref,omitempty"`
	}
)

// Lock listing pages: DefaultLockPage when the client names no limit,
// at most MaxLockPage.
const (
	DefaultLockPage = 100
	MaxLockPage     = 1000
	// maxLockBody bounds a lock request's body (a path is at most
	// repo.MaxLockPath bytes).
	maxLockBody = 16 << 10
)

func lockOf(l repo.Lock) lockJSON {
	return lockJSON{ID: l.ID, Path: l.Path, LockedAt: l.LockedAt.UTC().Format(time.RFC3339), Owner: &lockOwner{Name: l.Holder}}
}

func locksOf(ls []repo.Lock) []lockJSON {
	out := make([]lockJSON, 0, len(ls))
	for _, l := range ls {
		out = append(out, lockOf(l))
	}
	return out
}

// holder is what a lock records of who took it.
func holder(id auth.Identity) string { return id.Who() }

// lockQuery selects a page of locks.
type lockQuery struct {
	Path, ID, Cursor string
	Limit            int
}

// parseLimit reads a page size: absent is DefaultLockPage, anything
// above MaxLockPage is MaxLockPage.
func parseLimit(s string) (int, error) {
	if s == "" {
		return DefaultLockPage, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: limit %q is not a positive integer", errBadRequest, s)
	}
	return min(n, MaxLockPage), nil
}

// pageLocks is one page of all (in id order): the locks matching path and
// id (when given) from the cursor's id on, at most q.Limit, and the id
// the next page starts at ("" at the end).
func pageLocks(all []repo.Lock, q lockQuery) (page []repo.Lock, next string) {
	for _, l := range all {
		if (q.Path != "" && l.Path != q.Path) || (q.ID != "" && l.ID != q.ID) || l.ID < q.Cursor {
			continue
		}
		if len(page) == q.Limit {
			return page, l.ID
		}
		page = append(page, l)
	}
	return page, ""
}

// lockStatus answers a lock failure: a path locked already 409 with the
// lock, a refusal to unlock someone else's lock 403, the rest as fail.
func (s *Server) lockStatus(w http.ResponseWriter, r *http.Request, err error) int {
	var locked *repo.LockedError
	switch {
	case errors.As(err, &locked):
		l := lockOf(locked.Lock)
		writeJSON(w, http.StatusConflict, lockAnswer{Lock: &l, Message: "already locked by " + locked.Lock.Holder})
		return http.StatusConflict
	case errors.Is(err, repo.ErrNotLockHolder):
		writeJSON(w, http.StatusForbidden, message{Message: err.Error() + "; only the holder, or an administrator of the repository with --force, can unlock it"})
		return http.StatusForbidden
	case errors.Is(err, repo.ErrTooManyLocks):
		return s.fail(w, r, &gitproto.LimitError{What: "too many locks in one repository", Limit: repo.MaxLocks, Setting: ""})
	}
	return s.fail(w, r, err)
}

// lockRequest authenticates, reads the body into v (when not nil) and
// runs serve on the owner with access svc; it records the answer.
func (s *Server) lockRequest(w http.ResponseWriter, r *http.Request, name string, svc gitserve.Service, method string, v any,
	serve func(w http.ResponseWriter, r *http.Request, id auth.Identity, sess *gitserve.AuthorizedSession) int) {
	status := func() int {
		id, release, err := s.caller(r)
		defer release()
		if err != nil {
			return s.fail(w, r, err)
		}
		var body []byte
		if v != nil {
			if body, err = readBody(w, r, maxLockBody, v); err != nil {
				return s.fail(w, r, err)
			}
		}
		return s.routed(w, r, svc, id, body, method, func(w http.ResponseWriter, r *http.Request, sess *gitserve.AuthorizedSession) int {
			return serve(w, r, id, sess)
		})
	}()
	if status != forwarded {
		s.metrics.lock(name, status)
	}
}

// createLock answers POST …/info/lfs/locks (write access).
func (s *Server) createLock(w http.ResponseWriter, r *http.Request) {
	var req createLockRequest
	s.lockRequest(w, r, "create", gitserve.ReceivePack, http.MethodPost, &req, func(w http.ResponseWriter, r *http.Request, id auth.Identity, sess *gitserve.AuthorizedSession) int {
		l, err := s.locks.CreateLock(r.Context(), sess.Repo, req.Path, holder(id))
		if err != nil {
			return s.lockStatus(w, r, err)
		}
		j := lockOf(l)
		writeJSON(w, http.StatusCreated, lockAnswer{Lock: &j})
		return http.StatusCreated
	})
}

// listLocks answers GET …/info/lfs/locks?path=&id=&cursor=&limit=
// (read access).
func (s *Server) listLocks(w http.ResponseWriter, r *http.Request) {
	s.lockRequest(w, r, "list", gitserve.UploadPack, http.MethodGet, nil, func(w http.ResponseWriter, r *http.Request, id auth.Identity, sess *gitserve.AuthorizedSession) int {
		q := r.URL.Query()
		limit, err := parseLimit(q.Get("limit"))
		if err != nil {
			return s.fail(w, r, err)
		}
		all, err := s.locks.Locks(r.Context(), sess.Repo)
		if err != nil {
			return s.fail(w, r, err)
		}
		page, next := pageLocks(all, lockQuery{Path: q.Get("path"), ID: q.Get("id"), Cursor: q.Get("cursor"), Limit: limit})
		writeJSON(w, http.StatusOK, lockList{Locks: locksOf(page), NextCursor: next})
		return http.StatusOK
	})
}

// verifyLocks answers POST …/info/lfs/locks/verify (write access, as
// git-lfs asks before a push): the caller's locks and everyone else's.
func (s *Server) verifyLocks(w http.ResponseWriter, r *http.Request) {
	var req verifyLocksRequest
	s.lockRequest(w, r, "verify", gitserve.ReceivePack, http.MethodGet, &req, func(w http.ResponseWriter, r *http.Request, id auth.Identity, sess *gitserve.AuthorizedSession) int {
		limit, err := parseLimit("")
		if req.Limit > 0 {
			limit, err = parseLimit(strconv.Itoa(req.Limit))
		}
		if err != nil {
			return s.fail(w, r, err)
		}
		all, err := s.locks.Locks(r.Context(), sess.Repo)
		if err != nil {
			return s.fail(w, r, err)
		}
		page, next := pageLocks(all, lockQuery{Cursor: req.Cursor, Limit: limit})
		ans := verifyLocksAnswer{Ours: []lockJSON{}, Theirs: []lockJSON{}, NextCursor: next}
		me := holder(id)
		for _, l := range page {
			if repo.SameHolder(l.Holder, me) {
				ans.Ours = append(ans.Ours, lockOf(l))
			} else {
				ans.Theirs = append(ans.Theirs, lockOf(l))
			}
		}
		writeJSON(w, http.StatusOK, ans)
		return http.StatusOK
	})
}

// unlock answers POST …/info/lfs/locks/{id}/unlock (write access): the
// holder's own lock, or with force anyone's for an administrator of the
// repository.
func (s *Server) unlock(w http.ResponseWriter, r *http.Request) {
	var req unlockRequest
	s.lockRequest(w, r, "unlock", gitserve.ReceivePack, http.MethodPost, &req, func(w http.ResponseWriter, r *http.Request, id auth.Identity, sess *gitserve.AuthorizedSession) int {
		only := holder(id)
		if req.Force && mayForceUnlock(id, sess) {
			only = ""
		}
		l, err := s.locks.DeleteLock(r.Context(), sess.Repo, r.PathValue("id"), only)
		if err != nil {
			return s.lockStatus(w, r, err)
		}
		j := lockOf(l)
		writeJSON(w, http.StatusOK, lockAnswer{Lock: &j})
		return http.StatusOK
	})
}

// mayForceUnlock: removing another user's lock is an administrator's
// (auth.RoleOf on the settings the repository's writer holds).
func mayForceUnlock(id auth.Identity, sess *gitserve.AuthorizedSession) bool {
	a, ok := sess.Backend().(gitserve.Authoritative)
	return ok && auth.RoleOf(id, a.RepoInfo()) >= auth.RoleAdmin
}
