package httpgit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rgit/rgit/transport/service/gitserve/gitservetest"
	"github.com/rgit/rgit/transport/wire/reqid"
)

// idForwarder records the request ids the forwarder is handed.
type idForwarder struct{ seen, client string }

func (f *idForwarder) Forward(w http.ResponseWriter, r *http.Request, _ string) error {
	f.seen, f.client = reqid.From(r.Context()), reqid.ClientFrom(r.Context())
	w.WriteHeader(http.StatusTeapot)
	return nil
}

// TestRequestID: on a public port every request gets an id of the node's
// own, whatever X-Request-Id the client sent; a sane client id is kept
// beside it (client_request_id) and the forwarder gets both. On the peer
// port (FromPeers) the forwarding node's ids are kept.
func TestRequestID(t *testing.T) {
	f := newFixture(t)
	fw := &idForwarder{}
	start := func(fromPeers bool) string {
		s, err := New(Config{Resolver: &movingResolver{Resolver: f.res, owner: "rgit-1"},
			Auth: gitservetest.Tokens{aliceTok: "alice"}, Protocol: f.eng, Forward: fw, FromPeers: fromPeers})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	const refs = "/alice/pub.git/info/refs?service=git-upload-pack"
	public := start(false)
	for _, in := range []string{"lb-4f2a:9", "", "has space", "semi;colon"} {
		// A public client cannot choose the id, nor smuggle a client id
		// through the peers' header.
		r := do(t, mustReq(t, "GET", public+refs, "", map[string]string{reqid.Header: in, reqid.ClientHeader: "spoofed"}))
		got := r.header.Get(reqid.Header)
		if !reqid.Valid(got) || got != fw.seen || got == in {
			t.Errorf("X-Request-Id %q: answered %q, forwarded %q; want a new id of the node's", in, got, fw.seen)
		}
		if want := map[bool]string{true: in}[reqid.Valid(in)]; fw.client != want {
			t.Errorf("X-Request-Id %q: client id %q forwarded, want %q", in, fw.client, want)
		}
	}
	peer := start(true)
	r := do(t, mustReq(t, "GET", peer+refs, "", map[string]string{reqid.Header: "edge-1", reqid.ClientHeader: "lb-4f2a:9"}))
	if got := r.header.Get(reqid.Header); got != "edge-1" || fw.seen != "edge-1" || fw.client != "lb-4f2a:9" {
		t.Errorf("peer port: answered %q, forwarded %q and %q; want the forwarding node's ids kept", got, fw.seen, fw.client)
	}
}
