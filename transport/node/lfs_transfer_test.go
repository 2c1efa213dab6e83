package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/s3local"
)

// cutProxy forwards HTTP requests to a target, keeping the Host header
// (a presigned request signs it), and cuts the first request match
// picks once half of its body has arrived: the client sees its upload
// dropped mid-body, as on a failing network.
type cutProxy struct {
	*httptest.Server
	cuts atomic.Int32
}

func newCutProxy(t *testing.T, target string, match func(*http.Request) bool) *cutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.Out.Host = pr.In.Host
	}}
	p := &cutProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if match(r) && p.cuts.CompareAndSwap(0, 1) {
			io.CopyN(io.Discard, r.Body, r.ContentLength/2)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// TestLFSInterruptedUploadRetried: the first upload's connection drops
// halfway (to the node on the file store, to the store itself on S3);
// git-lfs retries it, the push succeeds, and the store holds exactly the
// pushed bytes.
func TestLFSInterruptedUploadRetried(t *testing.T) {
	for _, storeName := range []string{"file", "s3"} {
		t.Run(storeName, func(t *testing.T) {
			env := lfsEnv(t)
			var srv *gitenv.Server
			var proxy *cutProxy
			var repoURL func(tok string) string
			if storeName == "file" {
				srv = gitenv.StartServer(t, gitenv.FileStore(t))
				proxy = newCutProxy(t, "http://"+srv.HTTPAddr, func(r *http.Request) bool { return r.Method == http.MethodPut })
				repoURL = func(tok string) string {
					return "http://x:" + tok + "@" + strings.TrimPrefix(proxy.URL, "http://") + "/alice/game.git"
				}
			} else {
				s3 := s3local.Start(t)
				proxy = newCutProxy(t, s3.Endpoint, func(r *http.Request) bool {
					return r.Method == http.MethodPut && r.URL.Query().Get("X-Amz-Signature") != ""
				})
				var envs []string
				for _, kv := range s3.Env() {
					if strings.HasPrefix(kv, "AWS_ENDPOINT=") {
						kv = "AWS_ENDPOINT=" + proxy.URL
					}
					envs = append(envs, kv)
				}
				srv = gitenv.StartServer(t, gitenv.Store{Name: "s3", URL: "s3://" + s3.Bucket + "/cut", Env: envs})
				repoURL = func(tok string) string { return srv.HTTPURL(tok, "alice/game") }
			}
			tok := srv.AddToken(t, "alice")
			srv.CreateRepo(t, "alice/game")
			data := randomBytes(2 << 20)
			work := lfsWork(t, env, map[string][]byte{"big.bin": data})
			env.Run(t, work, "push", "-q", repoURL(tok), "main")
			if proxy.cuts.Load() != 1 {
				t.Fatalf("%d uploads were cut, want 1 (the proxy saw no upload?)", proxy.cuts.Load())
			}
			st := openStore(t, srv)
			keys := lfsKeys(t, st, "alice/game")
			if len(keys) != 1 {
				t.Fatalf("store holds %v", keys)
			}
			rc, _, err := st.Get(t.Context(), keys[0])
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(got, data) {
				t.Fatalf("stored %d bytes, not the %d pushed", len(got), len(data))
			}
		})
	}
}

// batchAs posts an LFS batch to the node as token (or with header h) and
// returns the status and answer.
func batchAs(t *testing.T, srv *gitenv.Server, repo, token string, h map[string]string, op, oid string, size int64) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"operation": op, "transfers": []string{"basic"},
		"objects": []map[string]any{{"oid": oid, "size": size}}, "hash_algo": "sha256"})
	req, _ := http.NewRequest(http.MethodPost, "http://"+srv.HTTPAddr+"/"+repo+".git/info/lfs/objects/batch", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/vnd.git-lfs+json")
	req.Header.Set("Accept", "application/vnd.git-lfs+json")
	if token != "" {
		req.SetBasicAuth("x", token)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans map[string]any
	json.NewDecoder(resp.Body).Decode(&ans)
	return resp.StatusCode, ans
}

// action is one action of a batch answer's first object.
func action(t *testing.T, ans map[string]any, name string) (href string, header map[string]string) {
	t.Helper()
	objs, _ := ans["objects"].([]any)
	if len(objs) != 1 {
		t.Fatalf("answer %v", ans)
	}
	acts, _ := objs[0].(map[string]any)["actions"].(map[string]any)
	a, ok := acts[name].(map[string]any)
	if !ok {
		t.Fatalf("no %s action in %v", name, ans)
	}
	header = map[string]string{}
	if h, ok := a["header"].(map[string]any); ok {
		for k, v := range h {
			header[k] = v.(string)
		}
	}
	return a["href"].(string), header
}

// send sends method href with body and header, returning the status.
func send(t *testing.T, method, href string, header map[string]string, body []byte) int {
	t.Helper()
	code, err := trySend(method, href, header, body)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// trySend is send that returns a transport error: a server may refuse an
// upload by closing the connection while the body is still being sent.
func trySend(method, href string, header map[string]string, body []byte) (int, error) {
	req, err := http.NewRequest(method, href, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestLFSWrongUploadRefusedByVerify: through a real node, an upload of
// the wrong size or with the wrong SHA-256 is refused (by the node as it
// streams on the file store, by the store on S3) and verify then finds
// no object; on S3, an object the store holds with other bytes under the
// id is refused by verify and removed, so the next batch asks for the
// upload again.
func TestLFSWrongUploadRefusedByVerify(t *testing.T) {
	for _, storeName := range []string{"file", "s3"} {
		t.Run(storeName, func(t *testing.T) {
			store := gitenv.FileStore(t)
			if storeName == "s3" {
				store = gitenv.S3Store(t, "verify")
			}
			srv := gitenv.StartServer(t, store)
			tok := srv.AddToken(t, "alice")
			srv.CreateRepo(t, "alice/game")
			data := randomBytes(300 << 10)
			oid := oidOf(data)
			code, ans := batchAs(t, srv, "alice/game", tok, nil, "upload", oid, int64(len(data)))
			if code != http.StatusOK {
				t.Fatalf("batch: %d %v", code, ans)
			}
			up, upHeader := action(t, ans, "upload")
			verify, verifyHeader := action(t, ans, "verify")
			verifyBody, _ := json.Marshal(map[string]any{"oid": oid, "size": len(data)})
			wrongHash := bytes.Clone(data)
			wrongHash[len(data)/2] ^= 0xff
			for name, body := range map[string][]byte{"wrong hash": wrongHash, "wrong size": data[:len(data)-1]} {
				// A refusal is an error status, or on S3 the store closing
				// the connection before the body is through.
				if code, err := trySend(http.MethodPut, up, upHeader, body); err == nil && code/100 == 2 {
					t.Fatalf("upload with the %s: %d, want a refusal", name, code)
				}
				if code := send(t, http.MethodPost, verify, verifyHeader, verifyBody); code != http.StatusNotFound {
					t.Fatalf("verify after the upload with the %s: %d, want 404", name, code)
				}
			}
			if storeName == "s3" {
				// Clients write to an S3 store themselves; verify checks
				// what is there. (On the file store only the node writes,
				// and only checked bytes.)
				st := openStore(t, srv)
				key := "objects/alice/game/lfs/" + oid
				if err := st.Put(t.Context(), key, bytes.NewReader(wrongHash), int64(len(wrongHash))); err != nil {
					t.Fatal(err)
				}
				if code := send(t, http.MethodPost, verify, verifyHeader, verifyBody); code != http.StatusUnprocessableEntity {
					t.Fatalf("verify of other bytes under the id: %d, want 422", code)
				}
				if keys := lfsKeys(t, st, "alice/game"); len(keys) != 0 {
					t.Fatalf("verify left the refused object: %v", keys)
				}
				if _, ans := batchAs(t, srv, "alice/game", tok, nil, "upload", oid, int64(len(data))); ans["objects"].([]any)[0].(map[string]any)["actions"] == nil {
					t.Fatal("the next batch does not ask for the upload again")
				}
			}
			if code := send(t, http.MethodPut, up, upHeader, data); code != http.StatusOK {
				t.Fatalf("upload: %d", code)
			}
			if code := send(t, http.MethodPost, verify, verifyHeader, verifyBody); code != http.StatusOK {
				t.Fatalf("verify: %d", code)
			}
		})
	}
}

// TestLFSAuthenticateOverSSH: with git-lfs-transfer unavailable (an SSH
// command that refuses it), git-lfs falls back to git-lfs-authenticate
// and moves the objects over HTTP with the header it answers.
func TestLFSAuthenticateOverSSH(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := lfsEnv(t)
	key := env.NewSSHKey(t, "alice")
	srv.AddKey(t, "alice", key)
	srv.CreateRepo(t, "alice/game")
	wrapper := filepath.Join(t.TempDir(), "ssh-no-transfer")
	script := "#!/bin/sh\ncase \"$*\" in *git-lfs-transfer*) echo 'git-lfs-transfer: not here' >&2; exit 1;; esac\nexec " + gitenv.SSHCommand(key) + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	extra := []string{"GIT_SSH_COMMAND=" + wrapper, "GIT_SSH_VARIANT=ssh", "GIT_TRACE=1"}
	data := randomBytes(1 << 20)
	work := lfsWork(t, env, map[string][]byte{"big.bin": data})
	r := env.TryEnv(work, extra, "push", srv.SSHURL("alice/game"), "main")
	if !r.OK() || !strings.Contains(r.Stderr, "git-lfs-authenticate /alice/game.git upload") {
		t.Fatalf("push: %s", r)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	r = env.TryEnv("", extra, "clone", "-q", srv.SSHURL("alice/game"), clone)
	if !r.OK() || !strings.Contains(r.Stderr, "git-lfs-authenticate /alice/game.git download") {
		t.Fatalf("clone: %s", r)
	}
	sameFile(t, filepath.Join(clone, "big.bin"), data)
}
