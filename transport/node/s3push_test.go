package node_test

// A push's pack goes to S3 while it is indexed (a multipart upload,
// completed only when the push stores it): real git against versitygw,
// with the store's requests refused at chosen points.

import (
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/s3local"
)

// TestPushStagedOnS3 pushes a pack big enough to go in parts (a 20 MiB
// incompressible file: the default part size is 16 MiB). A refused part
// fails the push with nothing stored and no upload left unfinished; a ref
// commit refused after the pack's upload completed fails the push (not
// acknowledged; the update applies later only as the ref database settles
// an unconfirmed write, with its pack stored); a retry leaves main at the
// pushed tip, and a clone has the history, fsck clean.
func TestPushStagedOnS3(t *testing.T) {
	s3srv := s3local.Start(t)
	var failPart, failRefs atomic.Bool
	proxy := s3srv.FaultProxy(t, func(r *http.Request) bool {
		switch {
		case failPart.Load():
			return r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2"
		case failRefs.Load():
			// The ref database's commit: a conditional write outside pack/.
			return r.Method == http.MethodPut && r.Header.Get("If-None-Match") == "*" && !strings.Contains(r.URL.Path, "/pack/")
		}
		return false
	})
	env := append(s3srv.Env(), "AWS_ENDPOINT="+proxy)
	srv := gitenv.StartServer(t, gitenv.Store{Name: "s3", URL: "s3://" + s3srv.Bucket + "/staged", Env: env})
	g := gitenv.New(t)
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/big")
	url := srv.HTTPURL(tok, "alice/big")

	work := filepath.Join(t.TempDir(), "w")
	g.Run(t, "", "init", "-q", "-b", "main", work)
	data := make([]byte, 20<<20)
	rng := rand.NewChaCha8([32]byte{28})
	rng.Read(data)
	if err := os.WriteFile(filepath.Join(work, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	g.Run(t, work, "add", "big.bin")
	tip := g.Commit(t, work, "big", map[string]string{"a.txt": "a\n"})

	client, err := s3store.New(t.Context(), s3srv.Config(""))
	if err != nil {
		t.Fatal(err)
	}
	noUploads := func(t *testing.T) {
		t.Helper()
		out, err := client.Client().ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &s3srv.Bucket})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Uploads) != 0 {
			t.Errorf("%d multipart uploads left unfinished", len(out.Uploads))
		}
	}
	noRef := func(t *testing.T) {
		t.Helper()
		if got := g.Run(t, "", "ls-remote", url, "refs/heads/main"); got != "" {
			t.Errorf("main is %q after a failed push", got)
		}
	}

	t.Run("part-refused", func(t *testing.T) {
		failPart.Store(true)
		defer failPart.Store(false)
		res := g.Fail(t, work, "push", "--porcelain", url, "main")
		if !strings.Contains(res.Stdout+res.Stderr, "object store unavailable: pack not stored") {
			t.Fatalf("push with a part refused:\n%s", res)
		}
		noRef(t)
		noUploads(t)
	})
	t.Run("ref-commit-refused", func(t *testing.T) {
		failRefs.Store(true)
		defer failRefs.Store(false)
		res := g.Fail(t, work, "push", "--porcelain", url, "main")
		if !strings.Contains(res.Stdout+res.Stderr, "object store unavailable") {
			t.Fatalf("push with its ref commit refused:\n%s", res)
		}
		noUploads(t)
	})
	t.Run("push", func(t *testing.T) {
		// The unconfirmed update of the last push is settled first: this
		// one then conflicts with it or applies; either way main is tip.
		g.Try(work, "push", "-q", url, "main")
		if got := strings.Fields(g.Run(t, "", "ls-remote", url, "refs/heads/main")); len(got) == 0 || got[0] != tip {
			t.Fatalf("main after the retry = %v, want %s", got, tip)
		}
		noUploads(t)
		dst := filepath.Join(t.TempDir(), "c")
		g.Run(t, "", "clone", "-q", "--bare", url, dst)
		if got := g.Run(t, dst, "rev-parse", "main"); got != tip {
			t.Fatalf("cloned main %s, pushed %s", got, tip)
		}
		g.Fsck(t, dst)
	})
}
