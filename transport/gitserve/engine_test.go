package gitserve

import (
	"io"
	"strings"
	"testing"

	"github.com/rgit/rgit/transport/gitproto"
)

// TestPackWork: which upload-pack calls reserve memory. The peeked
// request still reaches the protocol engine whole.
func TestPackWork(t *testing.T) {
	const lsRefsReq, fetchReq = "0014command=ls-refs\n0000", "0012command=fetch\n0000"
	for _, r := range []struct {
		name string
		body string
		opt  gitproto.Options
		want bool
	}{
		{"advertisement", "", gitproto.Options{StatelessRPC: true, AdvertiseOnly: true, Protocol: 2}, false},
		{"v2 ls-refs over HTTP", lsRefsReq, gitproto.Options{StatelessRPC: true, Protocol: 2}, false},
		{"v2 fetch over HTTP", fetchReq, gitproto.Options{StatelessRPC: true, Protocol: 2}, true},
		{"v2 short body over HTTP", "0000", gitproto.Options{StatelessRPC: true, Protocol: 2}, true},
		{"v0 negotiation over HTTP", "0032want 0123456789012345678901234567890123456789\n", gitproto.Options{StatelessRPC: true}, true},
		{"v2 session over SSH", lsRefsReq, gitproto.Options{Protocol: 2}, true},
	} {
		in, pack := packWork(strings.NewReader(r.body), r.opt)
		if pack != r.want {
			t.Errorf("%s: pack work %v, want %v", r.name, pack, r.want)
		}
		if b, _ := io.ReadAll(in); string(b) != r.body {
			t.Errorf("%s: engine reads %q, client sent %q", r.name, b, r.body)
		}
	}
}
