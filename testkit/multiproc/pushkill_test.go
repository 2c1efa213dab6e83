package multiproc

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/s3local"
)

// TestKillNineMidPush: a real node on versitygw is killed (SIGKILL) at
// each moment of a push where the store holds more than the node has
// acted on. A proxy forwards the chosen store request, keeps its answer
// back, and the test kills the node once the store has carried it out:
//
//   - a part of the pack uploaded: the push is not acknowledged, main is
//     unchanged, and the unfinished upload is left to garbage collection;
//   - the pack's upload completed: the pack is in the store, but no ref
//     names it; the push is not acknowledged and main is unchanged;
//   - the ref update written: durable though never acknowledged, so the
//     restarted node shows it, with its pack.
//
// In every case the push fails at the client, the restarted node serves
// a clone that is fsck clean at what it shows, and the push, made again,
// is acknowledged.
func TestKillNineMidPush(t *testing.T) {
	s3srv := s3local.Start(t)
	hold := s3srv.StartHoldProxy(t)
	// Maintenance off: a roll-up of the pushed packs writes packs and ref
	// database records of its own, which the proxy would take for the push's.
	c, env := startClusterWith(t, Options{Nodes: 1, StoreURL: "s3://" + s3srv.Bucket + "/kill",
		Env: append(s3srv.Env(), "AWS_ENDPOINT="+hold.URL, "RGIT_MAINTENANCE_SLOTS=0")})
	n := c.Nodes[0]
	tok := c.token(t, n, "alice")
	c.mustAdmin(t, n, "create-repo", "alice/k")
	url := n.HTTPURL(tok, "alice/k")
	work := env.Scratch(t)
	env.Commit(t, work, "base", map[string]string{"a.txt": "a\n"})
	env.Run(t, work, "push", "-q", url, "HEAD:refs/heads/main")

	client, err := s3store.New(t.Context(), s3srv.Config(""))
	if err != nil {
		t.Fatal(err)
	}
	uploads := func(t *testing.T) int {
		t.Helper()
		out, err := client.Client().ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &s3srv.Bucket})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Uploads)
	}
	packs := func(t *testing.T) int {
		t.Helper()
		prefix := "kill/objects/alice/k/pack/"
		out, err := client.Client().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: &s3srv.Bucket, Prefix: &prefix})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, o := range out.Contents {
			if strings.HasSuffix(*o.Key, ".pack") {
				n++
			}
		}
		return n
	}
	const (
		pack = "/kill/objects/alice/k/pack/"
		wal  = "/kill/repo/alice/k/wal/"
	)
	for _, tc := range []struct {
		name string
		pick func(*http.Request) bool
		// applied: the restarted node shows the push.
		applied bool
		// unfinished: uploads the killed node leaves behind; stored:
		// whether the push's pack is in the store.
		unfinished int
		stored     bool
	}{
		{"part-uploaded", func(r *http.Request) bool {
			return r.Method == http.MethodPut && strings.Contains(r.URL.Path, pack) && r.URL.Query().Get("partNumber") == "2"
		}, false, 1, false},
		{"pack-stored", func(r *http.Request) bool {
			return r.Method == http.MethodPost && strings.Contains(r.URL.Path, pack) && strings.HasSuffix(r.URL.Path, ".pack") &&
				r.URL.Query().Has("uploadId")
		}, false, 0, true},
		{"refs-written", func(r *http.Request) bool {
			return r.Method == http.MethodPut && strings.Contains(r.URL.Path, wal)
		}, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := strings.TrimSpace(env.Run(t, work, "rev-parse", "HEAD"))
			before, packsBefore := uploads(t), packs(t)
			// 20 MiB of random bytes: a pack in two parts (16 MiB each).
			tip := strings.TrimSpace(env.Commit(t, work, tc.name, map[string]string{tc.name + ".bin": string(randomBytes(t, 20<<20))}))
			held := hold.Hold(tc.pick)
			pushed := make(chan gitenv.Result, 1)
			go func() { pushed <- env.Try(work, "push", url, "HEAD:refs/heads/main") }()
			select {
			case code := <-held:
				if code != http.StatusOK {
					t.Fatalf("the store answered %d to the held request", code)
				}
			case res := <-pushed:
				t.Fatalf("push ended before the store request was held: %v\n%s", res.Err, res.Stderr)
			case <-time.After(2 * time.Minute):
				t.Fatal("the store request to hold never came")
			}
			if err := n.Kill(); err != nil {
				t.Fatal(err)
			}
			if res := <-pushed; res.Err == nil {
				t.Fatalf("push acknowledged by a node killed before it answered:\n%s", res.Stderr)
			}
			if got := uploads(t) - before; got != tc.unfinished {
				t.Errorf("%d multipart uploads left unfinished by the killed node, want %d", got, tc.unfinished)
			}
			if got := packs(t) - packsBefore; got != map[bool]int{true: 1, false: 0}[tc.stored] {
				t.Errorf("%d packs stored by the killed node's push, want stored=%v", got, tc.stored)
			}
			killed := time.Now()
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := n.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			want := base
			if tc.applied {
				want = tip
			}
			if got := mainOf(t, env, url); got != want {
				t.Fatalf("main is %s after the restart, want %s (applied=%v)", got, want, tc.applied)
			}
			t.Logf("served again %.1f s after the kill", time.Since(killed).Seconds())
			clone := filepath.Join(t.TempDir(), "clone")
			env.Run(t, "", "clone", "-q", url, clone)
			if got := strings.TrimSpace(env.Run(t, clone, "rev-parse", "HEAD")); got != want {
				t.Fatalf("cloned main %s, want %s", got, want)
			}
			env.Fsck(t, clone)
			env.Run(t, work, "push", "-q", url, "HEAD:refs/heads/main")
			if got := mainOf(t, env, url); got != tip {
				t.Fatalf("main is %s after the push made again, want %s", got, tip)
			}
		})
	}
}

// mainOf is the repository's main as ls-remote shows it, asked again
// while the restarted node has not yet taken the repository back (its
// lease from before the kill must lapse first).
func mainOf(t *testing.T, env *gitenv.Env, url string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		res := env.Try("", "ls-remote", url, "refs/heads/main")
		if res.Err == nil {
			return strings.TrimSpace(strings.TrimSuffix(res.Stdout, "\trefs/heads/main\n"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("ls-remote after the restart: %v\n%s", res.Err, res.Stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
