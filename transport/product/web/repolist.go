package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/repo"
)

// RepoListPath is where RepoLister is mounted: the one read-API endpoint
// that names no repository.
const RepoListPath = "/api/repos"

// WithRepoList is readAPI with GET RepoListPath answered by list.
func WithRepoList(readAPI, list http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == RepoListPath {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				writeJSONError(w, http.StatusMethodNotAllowed, "method not allowed")
				return
			}
			list.ServeHTTP(w, r)
			return
		}
		readAPI.ServeHTTP(w, r)
	})
}

// maxListed bounds the name index GET /api/repos reads (a listing plus
// one read per entry).
const maxListed = 1000

// DefaultPerPage is how many repositories one page of GET /api/repos
// holds.
const DefaultPerPage = 50

// listTTL is how long the name index as read for GET /api/repos serves
// every caller: reading it costs a listing and up to maxListed reads,
// which a stream of (anonymous) requests must not repeat. It matches the
// nodes' name-index cache (auth.RepoInfoCache): a repository may show in the
// list, by name only, that long after it went private.
const listTTL = 5 * time.Second

// RepoLister answers GET /api/repos?page=N: the caller (from a Bearer or
// Basic token; a bad token is 401) and one page of the repositories they
// may read, decided by the git rules (auth.Decide): the caller's own
// first, then everyone else's, each by name, as forges' explore pages
// list them. Answers are private, no-store: they depend on the caller.
type RepoLister struct {
	Store objstore.Store
	Auth  auth.TokenSource
	Log   *zap.Logger
	// PerPage is the page size (0: DefaultPerPage).
	PerPage int

	mu        sync.Mutex // held while the index is read: one read at a time
	readAt    time.Time
	metas     []auth.RepoInfo
	truncated bool
}

// index returns the name index as read at most listTTL ago.
func (l *RepoLister) index(ctx context.Context) ([]auth.RepoInfo, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.metas != nil && time.Since(l.readAt) < listTTL {
		return l.metas, l.truncated, nil
	}
	metas, truncated, err := repo.ListMeta(ctx, l.Store, maxListed)
	if err != nil {
		return nil, false, err
	}
	if metas == nil {
		metas = []auth.RepoInfo{} // an empty index is an answer too
	}
	l.metas, l.truncated, l.readAt = metas, truncated, time.Now()
	return metas, truncated, nil
}

func (l *RepoLister) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "private, no-store")
	log := l.Log
	if log == nil {
		log = zap.NewNop()
	}
	id, err := auth.FromRequest(r, l.Auth)
	if errors.Is(err, auth.ErrBadCredentials) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rgit"`)
		writeJSONError(w, http.StatusUnauthorized, "invalid token")
		return
	}
	if err != nil {
		log.Error("repository list: token lookup failed", zap.Error(err))
		writeJSONError(w, http.StatusServiceUnavailable, "token lookup unavailable")
		return
	}
	metas, truncated, err := l.index(r.Context())
	if err != nil {
		log.Error("repository list: reading the name index failed", zap.Error(err))
		writeJSONError(w, http.StatusServiceUnavailable, "repository list unavailable")
		return
	}
	page, err := strconv.Atoi(r.URL.Query().Get("page"))
	if r.URL.Query().Get("page") == "" {
		page, err = 1, nil
	}
	if err != nil || page < 1 || page > maxListed {
		writeJSONError(w, http.StatusBadRequest, "page must be a number from 1 to 1000")
		return
	}
	readable := listFor(id, metas)
	per := cmp.Or(l.PerPage, DefaultPerPage)
	from, to := min((page-1)*per, len(readable)), min(page*per, len(readable))
	out := RepoList{Viewer: id.Owner, Repos: readable[from:to], Truncated: truncated, Page: page, More: to < len(readable)}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// listFor is every repository of metas that id may read: id's own first,
// then the others, each sorted by name (names compare case-insensitively).
func listFor(id auth.Identity, metas []auth.RepoInfo) []RepoItem {
	out := []RepoItem{}
	for _, m := range metas {
		if auth.Decide(id, m, true, auth.Read) == auth.Allow {
			out = append(out, RepoItem{Owner: m.Repo.Owner(), Name: m.Repo.Name(), Public: m.Public})
		}
	}
	own := func(it RepoItem) bool { return id.Owner != "" && names.Same(it.Owner, id.Owner) }
	slices.SortStableFunc(out, func(a, b RepoItem) int {
		if oa, ob := own(a), own(b); oa != ob {
			if oa {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(names.Fold(a.Owner), names.Fold(b.Owner)), cmp.Compare(names.Fold(a.Name), names.Fold(b.Name)))
	})
	return out
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
