package web

import (
	"encoding/json"
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
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

// maxListed bounds GET /api/repos (a listing plus one read per entry).
const maxListed = 1000

// RepoLister answers GET /api/repos: the caller (from a Bearer or Basic
// token; a bad token is 401) and the repositories they may read, decided
// by the git rules (auth.Decide). Answers are private, no-store: they
// depend on the caller and change with every create.
type RepoLister struct {
	Store objstore.Store
	Auth  auth.TokenSource
	Log   *zap.Logger
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
	metas, truncated, err := repo.ListMeta(r.Context(), l.Store, maxListed)
	if err != nil {
		log.Error("repository list: reading the name index failed", zap.Error(err))
		writeJSONError(w, http.StatusServiceUnavailable, "repository list unavailable")
		return
	}
	out := RepoList{Viewer: id.Owner, Repos: []RepoItem{}, Truncated: truncated}
	for _, m := range metas {
		if auth.Decide(id, m.AccessInfo(), true, auth.Read) == auth.Allow {
			out.Repos = append(out.Repos, RepoItem{Owner: m.Owner, Name: m.Name, Public: m.Public})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
