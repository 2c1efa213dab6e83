package peer

import (
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/format"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// Headers of the peer protocol. The public HTTP front end strips every
// X-Rgit-* header a client sends, so they are only ever set by peers.
const (
	// HeaderSecret carries RGIT_PEER_SECRET on the peer HTTP port, where
	// Authorization is the client's own (forwarded untouched).
	HeaderSecret = "X-Rgit-Peer-Secret"
	// HeaderHop counts how many times a request was forwarded.
	HeaderHop = "X-Rgit-Hop"
	// HeaderVersion is the peer protocol version the sender speaks
	// (format.Peer). A request without it comes from a release that
	// predates it, which speaks version 1; such a release ignores it.
	HeaderVersion = "X-Rgit-Peer-Version"
)

// SetVersion marks a peer request as sent in this build's protocol
// version.
func SetVersion(h http.Header) {
	h.Set(HeaderVersion, strconv.FormatUint(uint64(format.Peer.Write), 10))
}

// versionOK lets through a request in a peer protocol version this build
// speaks; any other is answered 400 with the refusal (which names the
// version and the versions spoken here) and logged, so a fleet mixing
// releases the promise does not cover fails loudly rather than being
// misunderstood.
func versionOK(w http.ResponseWriter, r *http.Request, log *zap.Logger) bool {
	v, err := uint64(1), error(nil)
	if s := r.Header.Get(HeaderVersion); s != "" {
		if v, err = strconv.ParseUint(s, 10, 32); err != nil {
			log.Warn("peer request with a malformed protocol version", zap.String("remote", r.RemoteAddr), zap.String(HeaderVersion, s))
			http.Error(w, "bad "+HeaderVersion, http.StatusBadRequest)
			return false
		}
	}
	if err := format.Peer.Check(uint32(v)); err != nil {
		log.Error("peer request refused: protocol version", zap.String("remote", r.RemoteAddr),
			zap.String("path", r.URL.Path), zap.Uint64("version", v), zap.Error(err))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

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
// secret as a bearer token, anything else is 401, and speak a peer
// protocol version this build does (versionOK).
func RequireBearer(secret string, log *zap.Logger, next http.Handler) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !secretOK(bearer(r), secret) {
			refuse(w, r, log)
			return
		}
		if !versionOK(w, r, log) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequireSecret wraps a peer HTTP port handler that is not a forwarded
// request (the rollout status): the secret in HeaderSecret, else 401,
// and a peer protocol version this build speaks.
func RequireSecret(secret string, log *zap.Logger, next http.Handler) http.Handler {
	log = orNop(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !secretOK(r.Header.Get(HeaderSecret), secret) {
			refuse(w, r, log)
			return
		}
		if !versionOK(w, r, log) {
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
	return RequireSecret(secret, log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, ok := hops(r)
		if !ok {
			http.Error(w, "missing or bad "+HeaderHop, http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r.WithContext(gitserve.WithHops(r.Context(), n)))
	}))
}

func orNop(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return l
}
