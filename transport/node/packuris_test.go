package node_test

// Clones from the object store (protocol v2 packfile-uris) against a real
// S3 server (versitygw) and the real git client.

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// uriFixture is a node on S3 with maintenance off, so that packs change
// only when a test repacks.
func uriFixture(t *testing.T, store gitenv.Store, vars ...string) *fixture {
	srv := gitenv.StartServer(t, store, append([]string{"RGIT_MAINTENANCE_SLOTS=0"}, vars...)...)
	f := &fixture{srv: srv, env: gitenv.New(t)}
	f.aliceToken = srv.AddToken(t, "alice")
	f.bobToken = srv.AddToken(t, "bob")
	f.aliceKey = f.env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", f.aliceKey)
	return f
}

// uriGit runs git as the holder of token with pack URIs accepted over
// http, and returns its result and the hashes of the packs the server
// offered by URI (from the packet trace).
func uriGit(t *testing.T, f *fixture, dir string, args ...string) (gitenv.Result, []string) {
	t.Helper()
	return uriGitEnv(t, f, dir, nil, args...)
}

// uriGitEnv is uriGit with extra environment variables.
func uriGitEnv(t *testing.T, f *fixture, dir string, env []string, args ...string) (gitenv.Result, []string) {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace")
	r := f.env.TryEnv(dir, append([]string{"GIT_TRACE_PACKET=" + trace}, env...), append([]string{"-c", "fetch.uriprotocols=http"}, args...)...)
	b, err := os.ReadFile(trace)
	if err != nil && !os.IsNotExist(err) { // none: git exchanged no packets
		t.Fatal(err)
	}
	var offered []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		_, pkt, ok := strings.Cut(line, "< ")
		if !ok || !strings.Contains(line, "packet:") {
			continue
		}
		switch {
		case pkt == "packfile-uris":
			in = true
		case in && (pkt == "0001" || pkt == "packfile"):
			in = false
		case in:
			hash, uri, _ := strings.Cut(pkt, " ")
			if !strings.HasPrefix(uri, "http://") {
				t.Fatalf("offered URI %q", pkt)
			}
			offered = append(offered, hash)
		}
	}
	return r, offered
}

// uriClone clones repo as alice accepting pack URIs, checks the clone
// against the server's refs and with git fsck, and returns its path and
// the packs offered by URI.
func uriClone(t *testing.T, f *fixture, repo string, args ...string) (string, []string) {
	t.Helper()
	url := f.srv.HTTPURL(f.aliceToken, repo)
	dst := filepath.Join(t.TempDir(), "c")
	r, offered := uriGit(t, f, "", append(append([]string{"clone", "-q"}, args...), url, dst)...)
	if !r.OK() {
		t.Fatalf("%s\n%s", r, f.srv.LogTail(20))
	}
	remote := f.env.Run(t, "", "ls-remote", url)
	local := trackedRefs(t, f, dst)
	if slices.Contains(args, "--mirror") {
		local = f.env.Run(t, dst, "for-each-ref", "--format=%(objectname)\t%(refname)")
	}
	if !sameRefs(sortLines(local), sortLines(remote)) {
		t.Fatalf("clone refs:\n%s\nserver:\n%s", local, remote)
	}
	f.env.Fsck(t, dst)
	return dst, offered
}

// uriFetch fetches into the clone c of repo accepting pack URIs, checks
// that the server offered offers packs, that c's remote-tracking refs and
// tags are the server's and that git fsck accepts it.
func uriFetch(t *testing.T, f *fixture, repo, c, wt string, offers int) {
	t.Helper()
	r, offered := uriGit(t, f, c, "fetch", "-q", "origin")
	if !r.OK() || len(offered) != offers {
		t.Fatalf("fetch: offered %v, want %d\n%s\n%s", offered, offers, r, f.srv.LogTail(20))
	}
	if got, want := f.env.Run(t, c, "rev-parse", "origin/main"), f.env.Run(t, wt, "rev-parse", "HEAD"); got != want {
		t.Fatalf("fetched origin/main %s, pushed %s", got, want)
	}
	local := trackedRefs(t, f, c)
	if remote := f.env.Run(t, "", "ls-remote", f.srv.HTTPURL(f.aliceToken, repo)); !sameRefs(sortLines(local), sortLines(remote)) {
		t.Fatalf("fetched refs:\n%s\nserver:\n%s", local, remote)
	}
	f.env.Fsck(t, c)
}

// trackedRefs lists the refs of clone dir as the server names them: its
// remote-tracking branches as refs/heads/, and its tags.
func trackedRefs(t *testing.T, f *fixture, dir string) string {
	t.Helper()
	local := f.env.Run(t, dir, "for-each-ref", "--format=%(objectname)\t%(refname)", "refs/remotes/origin", "refs/tags")
	local = strings.ReplaceAll(local, "refs/remotes/origin/", "refs/heads/")
	return strings.Join(slices.DeleteFunc(strings.Split(local, "\n"), func(l string) bool { return strings.HasSuffix(l, "refs/heads/HEAD") }), "\n")
}

func sortLines(s string) string {
	l := strings.Split(s, "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}

// history pushes n commits with a file each to main of repo from a new
// work tree and returns the work tree.
func history(t *testing.T, f *fixture, repo string, n int) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "wt")
	f.env.Run(t, "", "clone", "-q", f.srv.HTTPURL(f.aliceToken, repo), wt)
	commits(t, f, wt, "base", n)
	f.env.Run(t, wt, "push", "-q", "origin", "HEAD:refs/heads/main")
	return wt
}

func commits(t *testing.T, f *fixture, wt, prefix string, n int) {
	t.Helper()
	for i := range n {
		f.env.Commit(t, wt, fmt.Sprintf("%s %d", prefix, i), map[string]string{
			fmt.Sprintf("%s-%d.txt", prefix, i): strings.Repeat(fmt.Sprintf("%s line %d\n", prefix, i), 200+i),
			"common.txt":                        fmt.Sprintf("%s version %d\n", prefix, i),
		})
	}
}

// TestPackURIClones: full and mirror clones of a repository with a
// repacked (bitmapped) base get that pack by URI and the rest inline, and
// end up with exactly the server's refs and a history git fsck accepts
// (over SSH too);
// so does a clone with many tags, and a fetch after pushes on top of the
// packed base: small pushes come inline, a large one by URI (and a clone
// then gets both packs), never the base the client has. Shallow, partial
// and protocol v0 clones get no URI.
func TestPackURIClones(t *testing.T) {
	s3 := s3local.Start(t)
	f := uriFixture(t, gitenv.Store{Name: "s3", URL: "s3://" + s3.Bucket + "/clones", Env: s3.Env()})
	offeredMetric := func(t *testing.T) float64 {
		return metricValue(t, f.srv, `rgit_pack_uri_fetches_total{result="offered"}`)
	}

	repo := f.repo(t, "uri")
	wt := history(t, f, repo, 20)
	f.env.Run(t, wt, "branch", "side", "HEAD~5")
	f.env.Run(t, wt, "tag", "-a", "v1", "-m", "v1", "HEAD~3")
	f.env.Run(t, wt, "push", "-q", "origin", "side", "v1")
	f.srv.Admin(t, "repack", repo)

	t.Run("clone", func(t *testing.T) {
		before := offeredMetric(t)
		_, offered := uriClone(t, f, repo)
		if len(offered) != 1 {
			t.Fatalf("offered %v, want the repacked pack", offered)
		}
		if got := offeredMetric(t); got != before+1 {
			t.Fatalf("offered clones metric %v, want %v", got, before+1)
		}
		store := metricValue(t, f.srv, `rgit_pack_uri_bytes_total{from="store"}`)
		node := metricValue(t, f.srv, `rgit_pack_uri_bytes_total{from="node"}`)
		// Everything is in the repacked pack: the inline pack is empty
		// (a 12-byte header and a 20-byte trailer).
		if store < 1000 || node != 32 {
			t.Fatalf("bytes from the store %v, from the node %v", store, node)
		}
	})
	t.Run("mirror", func(t *testing.T) {
		if _, offered := uriClone(t, f, repo, "--mirror"); len(offered) != 1 {
			t.Fatalf("offered %v", offered)
		}
	})
	t.Run("ssh", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "c")
		r, offered := uriGitEnv(t, f, "", gitenv.SSHEnv(f.aliceKey), "clone", "-q", f.srv.SSHURL(repo), dst)
		if !r.OK() || len(offered) != 1 {
			t.Fatalf("offered %v\n%s", offered, r)
		}
		f.env.Fsck(t, dst)
	})
	t.Run("without-uriprotocols", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "c")
		trace := filepath.Join(t.TempDir(), "trace")
		f.env.RunEnv(t, "", []string{"GIT_TRACE_PACKET=" + trace}, "clone", "-q", f.srv.HTTPURL(f.aliceToken, repo), dst)
		if b, _ := os.ReadFile(trace); strings.Contains(string(b), "< packfile-uris") {
			t.Fatal("a client that accepts no URI was sent one")
		}
		f.env.Fsck(t, dst)
	})
	t.Run("usual-path", func(t *testing.T) {
		// Shallow, partial and protocol v0 clones get no URI.
		for _, args := range [][]string{{"clone", "--depth", "1"}, {"clone", "--filter=blob:none"}, {"-c", "protocol.version=0", "clone"}} {
			dst := filepath.Join(t.TempDir(), "c")
			r, offered := uriGit(t, f, "", append(args, "-q", f.srv.HTTPURL(f.aliceToken, repo), dst)...)
			if !r.OK() || len(offered) != 0 {
				t.Fatalf("clone %v: offered %v\n%s", args, offered, r)
			}
			f.env.Fsck(t, dst)
		}
	})
	t.Run("pushes-on-top", func(t *testing.T) {
		c, _ := uriClone(t, f, repo)
		commits(t, f, wt, "top", 3)
		f.env.Run(t, wt, "push", "-q", "origin", "HEAD:main")
		// A clone now gets the base by URI and the new pushes inline.
		if _, offered := uriClone(t, f, repo); len(offered) != 1 {
			t.Fatalf("offered %v", offered)
		}
		// A fetch into the earlier clone: the small pushes are under
		// RGIT_PACK_URI_MIN_BYTES, and the base is what the client has.
		uriFetch(t, f, repo, c, wt, 0)

		// A push of 2 MiB (incompressible, over the minimum) on top: the
		// next fetch gets its pack by URI, the base still not, and git
		// follows the tag pushed with it (include-tag).
		big := make([]byte, 2<<20)
		rand.Read(big)
		f.env.Commit(t, wt, "big", map[string]string{"big.bin": string(big)})
		f.env.Run(t, wt, "tag", "-a", "big", "-m", "big")
		f.env.Run(t, wt, "push", "-q", "origin", "HEAD:main", "big")
		before := metricValue(t, f.srv, `rgit_pack_uri_bytes_total{from="node"}`)
		uriFetch(t, f, repo, c, wt, 1)
		if r := f.env.Try(c, "rev-parse", "-q", "--verify", "refs/tags/big"); !r.OK() {
			t.Fatalf("the fetch did not follow the pushed tag: %s", r)
		}
		// Everything the fetch needed is in the pushed pack: the inline
		// pack is empty (a 12-byte header and a 20-byte trailer).
		if node := metricValue(t, f.srv, `rgit_pack_uri_bytes_total{from="node"}`); node != before+32 {
			t.Fatalf("the node sent %v bytes inline, want 32", node-before)
		}
		// A clone gets the base and the large push by URI.
		if _, offered := uriClone(t, f, repo); len(offered) != 2 {
			t.Fatalf("clone: offered %v, want the base and the large push", offered)
		}
		// A fetch that has it all gets nothing by URI.
		uriFetch(t, f, repo, c, wt, 0)
	})
	t.Run("many-tags", func(t *testing.T) {
		repo := f.repo(t, "tags")
		wt := history(t, f, repo, 30)
		for i := range 30 {
			f.env.Run(t, wt, "tag", "-a", fmt.Sprintf("a%d", i), "-m", "tag", fmt.Sprintf("HEAD~%d", i))
			f.env.Run(t, wt, "tag", fmt.Sprintf("l%d", i), fmt.Sprintf("HEAD~%d", i))
		}
		f.env.Run(t, wt, "push", "-q", "origin", "--tags")
		f.srv.Admin(t, "repack", repo)
		commits(t, f, wt, "after", 2)
		f.env.Run(t, wt, "tag", "-a", "newest", "-m", "newest")
		f.env.Run(t, wt, "push", "-q", "origin", "HEAD:main", "newest")
		if _, offered := uriClone(t, f, repo); len(offered) != 1 {
			t.Fatalf("offered %v", offered)
		}
	})
}

// TestPackURIDeletedBranch: a pack that holds a commit whose branch was
// deleted after the pack was written is not offered, and the commit is in
// nothing the clone receives; once a repack rewrites the pack from the
// refs, the new pack is offered.
func TestPackURIDeletedBranch(t *testing.T) {
	s3 := s3local.Start(t)
	f := uriFixture(t, gitenv.Store{Name: "s3", URL: "s3://" + s3.Bucket + "/deleted", Env: s3.Env()})
	repo := f.repo(t, "deleted")
	wt := history(t, f, repo, 5)
	f.env.Run(t, wt, "checkout", "-q", "-b", "gone")
	secret := f.env.Commit(t, wt, "secret", map[string]string{"secret.txt": "only on the deleted branch\n"})
	f.env.Run(t, wt, "push", "-q", "origin", "gone")
	f.srv.Admin(t, "repack", repo)
	f.env.Run(t, wt, "push", "-q", "origin", ":gone")

	c, offered := uriClone(t, f, repo)
	if len(offered) != 0 {
		t.Fatalf("offered %v: a pack holding the deleted branch's commit", offered)
	}
	if r := f.env.Try(c, "cat-file", "-e", secret); r.OK() {
		t.Fatal("the clone holds the deleted branch's commit")
	}
	if v := metricValue(t, f.srv, `rgit_pack_uri_fetches_total{result="unreachable"}`); v != 1 {
		t.Fatalf("unreachable metric %v, want 1", v)
	}

	f.srv.Admin(t, "repack", repo)
	c, offered = uriClone(t, f, repo)
	if len(offered) != 1 {
		t.Fatalf("after the repack: offered %v, want the new pack", offered)
	}
	if r := f.env.Try(c, "cat-file", "-e", secret); r.OK() {
		t.Fatal("the clone holds the deleted branch's commit")
	}
}

// TestPackURIPrivate: a URL goes only to a caller who may read the
// repository. A stranger and an anonymous client get the same answer as
// for a missing repository ("not found"; a request for credentials), and
// no URI.
func TestPackURIPrivate(t *testing.T) {
	s3 := s3local.Start(t)
	f := uriFixture(t, gitenv.Store{Name: "s3", URL: "s3://" + s3.Bucket + "/private", Env: s3.Env()})
	repo := f.repo(t, "private")
	history(t, f, repo, 3)
	f.srv.Admin(t, "repack", repo)
	if _, offered := uriClone(t, f, repo); len(offered) != 1 {
		t.Fatalf("owner: offered %v", offered)
	}
	for name, token := range map[string]string{"stranger": f.bobToken, "anonymous": ""} {
		var answers []string
		for _, target := range []string{repo, "alice/missing"} {
			dst := filepath.Join(t.TempDir(), "c")
			r, offered := uriGit(t, f, "", "clone", "-q", f.srv.HTTPURL(token, target), dst)
			if r.OK() || len(offered) != 0 {
				t.Fatalf("%s cloning %s: offered %v\n%s", name, target, offered, r)
			}
			answers = append(answers, strings.ReplaceAll(r.Stderr, target, "REPO"))
		}
		if answers[0] != answers[1] {
			t.Fatalf("%s: the private repository answers\n%s\nand a missing one\n%s", name, answers[0], answers[1])
		}
		if name == "stranger" && !strings.Contains(answers[0], "not found") {
			t.Fatalf("stranger: %s", answers[0])
		}
	}
}

// TestPackURIExpired: a client that starts its download after the URL
// expired fails the clone cleanly: git says so, exits non-zero and leaves
// no clone behind. A proxy in front of the store holds the download of
// the pack until its URL has expired.
func TestPackURIExpired(t *testing.T) {
	s3 := s3local.Start(t)
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	var held atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, ".pack") && q.Get("X-Amz-Signature") != "" {
			signed, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
			secs, err2 := strconv.Atoi(q.Get("X-Amz-Expires"))
			if err != nil || err2 != nil {
				http.Error(w, "bad presigned URL", http.StatusBadRequest)
				return
			}
			held.Add(1)
			// S3 compares whole seconds: wait until a second past expiry.
			select {
			case <-time.After(time.Until(signed.Add(time.Duration(secs+1) * time.Second))):
			case <-r.Context().Done():
				return
			}
		}
		forward.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	env := slices.DeleteFunc(s3.Env(), func(kv string) bool { return strings.HasPrefix(kv, "AWS_ENDPOINT=") })
	env = append(env, "AWS_ENDPOINT="+proxy.URL)
	f := uriFixture(t, gitenv.Store{Name: "s3", URL: "s3://" + s3.Bucket + "/expired", Env: env}, "RGIT_PACK_URI_SECS=1")
	repo := f.repo(t, "expired")
	history(t, f, repo, 3)
	f.srv.Admin(t, "repack", repo)

	dst := filepath.Join(t.TempDir(), "c")
	r, offered := uriGit(t, f, "", "clone", "-q", f.srv.HTTPURL(f.aliceToken, repo), dst)
	if len(offered) != 1 || held.Load() != 1 {
		t.Fatalf("offered %v, downloads held %d", offered, held.Load())
	}
	if r.OK() {
		t.Fatalf("clone with an expired pack URL succeeded: %s", r)
	}
	if !strings.Contains(r.Stderr, "403") {
		t.Fatalf("git did not report the refused download: %s", r)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatalf("a failed clone left %s behind (%v)", dst, err)
	}
	t.Logf("git says:\n%s", r.Stderr)
}

// TestPackURIBase: with RGIT_PACK_URI_BASE the pack URLs name a proxy in
// front of the store (a reverse proxy under /cdn here) and keep the
// signed path and query, so a proxy that forwards them untouched with the
// store's Host header serves the clone; one that passes on its own Host
// breaks the signature (SigV4 signs the Host) and the clone fails
// cleanly, as does a URL whose query was altered.
func TestPackURIBase(t *testing.T) {
	s3 := s3local.Start(t)
	store, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var keepHost, tamper atomic.Bool
	var served atomic.Int32
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		path, ok := strings.CutPrefix(r.In.URL.Path, "/cdn/")
		if !ok {
			path = "not-under-the-base" // the store refuses it
		}
		served.Add(1)
		r.SetURL(store) // the store's Host header, unless keepHost
		r.Out.URL.Path, r.Out.URL.RawPath = "/"+path, ""
		if keepHost.Load() {
			r.Out.Host = r.In.Host
		}
		if tamper.Load() {
			q := r.Out.URL.Query()
			q.Set("X-Amz-Expires", "604800")
			r.Out.URL.RawQuery = q.Encode()
		}
	}})
	defer proxy.Close()
	f := uriFixture(t, gitenv.Store{Name: "s3", URL: "s3://" + s3.Bucket + "/base", Env: s3.Env()}, "RGIT_PACK_URI_BASE="+proxy.URL+"/cdn/")
	repo := f.repo(t, "base")
	history(t, f, repo, 5)
	f.srv.Admin(t, "repack", repo)

	// The URL names the proxy, under its prefix.
	trace := filepath.Join(t.TempDir(), "trace")
	dst := filepath.Join(t.TempDir(), "c")
	f.env.RunEnv(t, "", []string{"GIT_TRACE_PACKET=" + trace, "GIT_TRACE_REDACT=0"}, "-c", "fetch.uriprotocols=http", "clone", "-q", f.srv.HTTPURL(f.aliceToken, repo), dst)
	if b, err := os.ReadFile(trace); err != nil || !strings.Contains(string(b), " "+proxy.URL+"/cdn/"+s3.Bucket+"/") {
		t.Fatalf("no pack URL under %s/cdn/ in the trace (%v)", proxy.URL, err)
	}
	f.env.Fsck(t, dst)
	if served.Load() != 1 {
		t.Fatalf("the proxy served %d downloads, want 1", served.Load())
	}
	uriClone(t, f, repo)

	for name, set := range map[string]*atomic.Bool{"proxy sends its own Host": &keepHost, "query altered": &tamper} {
		set.Store(true)
		dst := filepath.Join(t.TempDir(), "c")
		r, offered := uriGit(t, f, "", "clone", "-q", f.srv.HTTPURL(f.aliceToken, repo), dst)
		set.Store(false)
		if r.OK() || len(offered) != 1 || !strings.Contains(r.Stderr, "403") {
			t.Fatalf("%s: offered %v, clone %s", name, offered, r)
		}
		if _, err := os.Stat(dst); !os.IsNotExist(err) {
			t.Fatalf("%s: a failed clone left %s behind (%v)", name, dst, err)
		}
	}
}
