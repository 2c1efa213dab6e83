package serve_test

// Clones from the object store (protocol v2 packfile-uris) against a real
// S3 server (versitygw) and the real git client.

import (
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/s3local"
)

// uriCapability is the fetch capability line of a server that offers pack
// URIs, as GIT_TRACE_PACKET prints it.
const uriCapability = "fetch=shallow wait-for-done filter ref-in-want packfile-uris"

// TestPackURIsAdvertised: packfile-uris is advertised on an S3 store by
// default, and neither on S3 with RGIT_PACK_URIS=0 nor on a file store,
// whose node would serve the bytes anyway.
func TestPackURIsAdvertised(t *testing.T) {
	s3 := s3local.Start(t)
	cases := []struct {
		name  string
		store gitenv.Store
		vars  []string
		want  bool
	}{
		{"s3", gitenv.Store{Name: "s3", URL: "s3://" + s3.Bucket + "/adv-on", Env: s3.Env()}, nil, true},
		{"s3-off", gitenv.Store{Name: "s3", URL: "s3://" + s3.Bucket + "/adv-off", Env: s3.Env()}, []string{"RGIT_PACK_URIS=0"}, false},
		{"file", gitenv.FileStore(t), nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := gitenv.StartServer(t, c.store, c.vars...)
			env := gitenv.New(t)
			token := srv.AddToken(t, "alice")
			srv.CreateRepo(t, "alice/adv")
			r := env.TryEnv("", []string{"GIT_TRACE_PACKET=1"}, "ls-remote", srv.HTTPURL(token, "alice/adv"))
			if !r.OK() {
				t.Fatalf("%s", r)
			}
			if got := strings.Contains(r.Stderr, uriCapability); got != c.want {
				t.Fatalf("packfile-uris advertised: %v, want %v\n%s", got, c.want, r.Stderr)
			}
		})
	}
}
