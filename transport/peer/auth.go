package peer

import (
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/rgit/rgit/transport/gitserve"
)

// Headers of the peer protocol. The public HTTP front end strips every
// X-Rgit-* header a client sends, so they are only ever set by peers.
const (
	// HeaderSecret carries RGIT_PEER_SECRET on the peer HTTP port, where
	// Authorization is the client's own (forwarded untouched).
	HeaderSecret = "X-Rgit-Peer-Secret"
	// HeaderHop counts how many times a request was forwarded.
	HeaderHop = "X-Rgit-Hop"
)

// secretOK compares in constant time; an empty configured secret never
// matches (a node without a secret accepts no peer traffic).
func secretOK(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// bearer extracts "Authorization: Bearer <secret>".
func bearer(r *http.Request) string {
	s, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return s
}

// refuse answers 401 and logs: a peer port reached without the secret is
// a misconfiguration or a probe.
func refuse(w http.ResponseWriter, r *http.Request, log *zap.Logger) {
	log.Warn("peer request with a bad or missing peer secret",
		zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path))
	http.Error(w, "bad or missing peer secret", http.StatusUnauthorized)
}

// RequireBearer wraps the stream port's handlers: requests must carry the
// secret as a bearer token, anything else is 401.
func RequireBearer(secret string, log *zap.Logger, next http.Handler) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !secretOK(bearer(r), secret) {
			refuse(w, r, log)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequireSecret wraps a peer HTTP port handler that is not a forwarded
// request (the rollout status): the secret in HeaderSecret, else 401.
func RequireSecret(secret string, log *zap.Logger, next http.Handler) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !secretOK(r.Header.Get(HeaderSecret), secret) {
			refuse(w, r, log)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hops parses the hop header: forwarded requests carry 1..MaxHops.
func hops(r *http.Request) (int, bool) {
	n, err := strconv.Atoi(r.Header.Get(HeaderHop))
	return n, err == nil && n >= 1 && n <= gitserve.MaxHops
}

// PeerHTTP is the peer HTTP listener's handler: it accepts only requests
// forwarded by another node (secret in HeaderSecret, a valid hop count),
// records the hop count in the request context (where the forwarder reads
// it, so a stale owner forwards at most up to gitserve.MaxHops) and hands
// the request to next, the ordinary smart-HTTP front end.
func PeerHTTP(secret string, log *zap.Logger, next http.Handler) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !secretOK(r.Header.Get(HeaderSecret), secret) {
			refuse(w, r, log)
			return
		}
		n, ok := hops(r)
		if !ok {
			http.Error(w, "missing or bad "+HeaderHop, http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r.WithContext(gitserve.WithHops(r.Context(), n)))
	})
}

func orNop(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return l
}
