package web

import (
	"net/http"

	"github.com/rgit/rgit/transport/frontend/httpgit"
	"github.com/rgit/rgit/transport/wire/clientlimit"
)

// LimitUnauthenticated caps per client address the page requests without
// credentials in flight (p: RGIT_MAX_ANON_PER_ADDR, the budget git, Git
// LFS and the read API share), as api.LimitUnauthenticated does for the
// API: more are answered 429 with Retry-After before any view runs. A
// signed-in browser (the token cookie) holds nothing; its token is
// checked by the first API call and refused when bad. The page's own
// calls to the API are in process and take no unit of their own.
func (h *Handler) LimitUnauthenticated(p *clientlimit.PerAddr) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, ok := p.AcquireRequest(r, tokenCookie)
		if !ok {
			w.Header().Set("Retry-After", httpgit.RetryAfter)
			// Plain text, as git's refusal: no view (and none of its
			// cost) runs for a request turned away.
			http.Error(w, p.Refusal(), http.StatusTooManyRequests)
			return
		}
		defer release()
		h.ServeHTTP(w, r)
	})
}
