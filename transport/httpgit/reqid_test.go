package httpgit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rgit/rgit/transport/gitserve/gitservetest"
	"github.com/rgit/rgit/transport/reqid"
)

// idForwarder records the request id the forwarder is handed.
type idForwarder struct{ seen string }

func (f *idForwarder) Forward(w http.ResponseWriter, r *http.Request, _ string) error {
	f.seen = reqid.From(r.Context())
	w.WriteHeader(http.StatusTeapot)
	return nil
}

// TestRequestID: a sane X-Request-Id is kept, anything else replaced by a
// fresh id; either way the answer echoes it and the forwarder gets it.
func TestRequestID(t *testing.T) {
	f := newFixture(t)
	fw := &idForwarder{}
	s, err := New(Config{Resolver: &movingResolver{Resolver: f.res, owner: "rgit-1"},
		Auth: gitservetest.Tokens{aliceTok: "alice"}, Engine: f.eng, Forward: fw})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	const refs = "/alice/pub.git/info/refs?service=git-upload-pack"
	for _, in := range []string{"lb-4f2a:9", "", "has space", "semi;colon"} {
		r := do(t, mustReq(t, "GET", srv.URL+refs, "", map[string]string{reqid.Header: in}))
		got := r.header.Get(reqid.Header)
		if !reqid.Valid(got) || got != fw.seen || (reqid.Valid(in) != (got == in)) {
			t.Errorf("X-Request-Id %q: answered %q, forwarded %q", in, got, fw.seen)
		}
	}
}
