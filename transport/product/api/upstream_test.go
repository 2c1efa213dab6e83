package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/rgit/rgit/testkit/redistest"
	"github.com/rgit/rgit/transport/frontend/peer"
)

// cuttingFleet stands for the git fleet behind api-serve: it answers a
// public commit, and with cut set it dies half way through the body (the
// connection closes, as when a node is killed or a client of the node
// goes away).
type cuttingFleet struct {
	cut   atomic.Bool
	calls atomic.Int32
	chunk bool // no Content-Length of its own: a cut answer goes chunked
}

const fleetBody = `{"oid":"0123456789abcdef0123456789abcdef01234567","message":"a commit message long enough to cut"}` + "\n"

func (f *cuttingFleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", ccImmutable)
	h.Set("ETag", `"e"`)
	if !f.chunk {
		h.Set("Content-Length", strconv.Itoa(len(fleetBody)))
	}
	w.WriteHeader(http.StatusOK)
	if !f.cut.Load() {
		w.Write([]byte(fleetBody))
		return
	}
	w.Write([]byte(fleetBody[:len(fleetBody)/2]))
	http.NewResponseController(w).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// TestUpstreamCutNotStored: an answer the fleet stops sending half way is
// not stored in Redis, with or without a Content-Length; the next request
// asks the fleet again, and a whole answer is stored as before.
func TestUpstreamCutNotStored(t *testing.T) {
	for _, chunk := range []bool{false, true} {
		name := map[bool]string{false: "content-length", true: "chunked"}[chunk]
		t.Run(name, func(t *testing.T) {
			c, rs := realCache(t, "maxmemory-policy volatile-lru")
			fleet := &cuttingFleet{chunk: chunk}
			fleet.cut.Store(true)
			fsrv := httptest.NewServer(peer.PeerHTTP("secret-0123456789", zap.NewNop(), fleet))
			t.Cleanup(fsrv.Close)
			up, err := NewUpstream(fsrv.URL, "secret-0123456789", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(up.Close)
			srv := newTestHandler(t, c, up)
			path := "/api/alice/site/commit/" + oidA
			for i := range 2 {
				_, h, body := get(t, srv, path)
				if x := h.Get("X-Cache"); x != "miss" || body == fleetBody {
					t.Fatalf("request %d while the fleet cuts answers: X-Cache %q, body %q", i, x, body)
				}
			}
			if n := fleet.calls.Load(); n != 2 {
				t.Fatalf("the fleet was asked %d times, want 2", n)
			}
			if keys, err := redisKeys(rs); err != nil || len(keys) != 0 {
				t.Fatalf("Redis holds %v (%v) after cut answers", keys, err)
			}
			fleet.cut.Store(false)
			get(t, srv, path)
			_, h, body := get(t, srv, path)
			if h.Get("X-Cache") != "hit" || body != fleetBody {
				t.Fatalf("whole answers: X-Cache %q, body %q", h.Get("X-Cache"), body)
			}
		})
	}
}

// redisKeys lists every key the server holds.
func redisKeys(rs *redistest.Server) ([]string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	return rdb.Keys(context.Background(), "*").Result()
}
