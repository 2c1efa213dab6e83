package admin

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"go.uber.org/zap"
)

// RequireSecret wraps h so that only callers presenting secret as a bearer
// token reach it; everyone else gets 401. It guards every handler on the
// admin listener (commands and the /debug/pprof/ profiles), so they share
// one check.
func RequireSecret(secret string, log *zap.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorized(w, r, secret, log) {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries secret as a bearer token, answering
// 401 when it does not. The comparison is constant time; an empty secret
// never matches, so a misconfigured node refuses everyone.
func authorized(w http.ResponseWriter, r *http.Request, secret string, log *zap.Logger) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && secret != "" && subtle.ConstantTimeCompare([]byte(got), []byte(secret)) == 1 {
		return true
	}
	if log != nil {
		log.Warn("admin request with a bad or missing peer secret", zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path))
	}
	http.Error(w, "bad or missing peer secret", http.StatusUnauthorized)
	return false
}
