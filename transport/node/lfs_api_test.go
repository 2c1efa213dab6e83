package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// getNoRedirect GETs url as the holder of token (none: anonymous),
// showing a redirect instead of following it.
func getNoRedirect(t *testing.T, url, token string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestLFSReadAPIAndWebPage: the read API says a pointer file is stored
// with Git LFS and how large it is, the web page shows it so, and raw
// serves the file itself: a redirect to a short-lived presigned URL of
// the store on S3 (never cached), the bytes streamed on the file store.
// A pointer whose object is not stored is served as it is, uncached. The
// access rules are the API's: a private repository's file is 401 to an
// anonymous caller and 404 to a stranger.
func TestLFSReadAPIAndWebPage(t *testing.T) {
	for _, storeName := range []string{"file", "s3"} {
		t.Run(storeName, func(t *testing.T) {
			store := gitenv.FileStore(t)
			if storeName == "s3" {
				store = gitenv.S3Store(t, "api")
			}
			srv := gitenv.StartServer(t, store)
			env := lfsEnv(t)
			tok, stranger := srv.AddToken(t, "alice"), srv.AddToken(t, "carol")
			art := randomBytes(300 << 10)
			ghost := "version https://git-lfs.github.com/spec/v1\noid sha256:" + strings.Repeat("0", 64) + "\nsize 12\n"
			work := lfsWork(t, env, map[string][]byte{"art.bin": art, "ghost.txt": []byte(ghost)})
			commit := env.Run(t, work, "rev-parse", "HEAD")
			// ghost.txt is a pointer whose object nobody has.
			env.Run(t, work, "config", "lfs.allowincompletepush", "true")
			for _, repo := range []string{"alice/pub", "alice/priv"} {
				srv.CreateRepo(t, repo)
				env.Run(t, work, "push", "-q", srv.HTTPURL(tok, repo), "main")
			}
			srv.Admin(t, "set-visibility", "alice/pub", "public")
			api := "http://" + srv.HTTPAddr + "/api/alice/pub/"

			resp, body := getNoRedirect(t, api+"blob/"+commit+"/art.bin", "")
			var blob struct {
				LFS *struct {
					OID  string `json:"oid"`
					Size int64  `json:"size"`
				} `json:"lfs"`
			}
			if err := json.Unmarshal(body, &blob); err != nil || resp.StatusCode != 200 || blob.LFS == nil || blob.LFS.OID != oidOf(art) || blob.LFS.Size != int64(len(art)) {
				t.Fatalf("blob answer %d %s", resp.StatusCode, body)
			}
			resp, body = getNoRedirect(t, "http://"+srv.HTTPAddr+"/alice/pub/blob/"+commit+"/art.bin", "")
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte("Stored with Git LFS (300.0 KiB)")) {
				t.Fatalf("web page %d: %s", resp.StatusCode, body)
			}

			resp, body = getNoRedirect(t, api+"raw/"+commit+"/art.bin", "")
			if storeName == "s3" {
				loc := resp.Header.Get("Location")
				if resp.StatusCode != http.StatusFound || !strings.Contains(loc, "X-Amz-Signature") || resp.Header.Get("Cache-Control") != "private, no-store" {
					t.Fatalf("raw on S3: %d %v, want a 302 to a presigned URL, uncached", resp.StatusCode, resp.Header)
				}
				resp, body = getNoRedirect(t, loc, "")
			}
			if resp.StatusCode != 200 || !bytes.Equal(body, art) {
				t.Fatalf("raw: %d, %d bytes, want the file's %d", resp.StatusCode, len(body), len(art))
			}
			resp, body = getNoRedirect(t, api+"raw/"+commit+"/ghost.txt", "")
			if resp.StatusCode != 200 || string(body) != ghost || resp.Header.Get("Cache-Control") != "private, no-store" {
				t.Fatalf("raw of a pointer without its object: %d %q %v", resp.StatusCode, body, resp.Header)
			}

			priv := "http://" + srv.HTTPAddr + "/api/alice/priv/raw/" + commit + "/art.bin"
			if resp, _ := getNoRedirect(t, priv, ""); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("anonymous raw of a private file: %d", resp.StatusCode)
			}
			if resp, _ := getNoRedirect(t, priv, stranger); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("a stranger's raw of a private file: %d", resp.StatusCode)
			}
			if resp, _ := getNoRedirect(t, priv, tok); resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusFound {
				t.Fatalf("the owner's raw of a private file: %d", resp.StatusCode)
			}
		})
	}
}

// TestLFSForkAndDelete: a fork gets its own copies of the LFS objects
// (deleting the source leaves the fork's clone whole), and deleting a
// repository removes its LFS objects from the store.
func TestLFSForkAndDelete(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := lfsEnv(t)
	tok := srv.AddToken(t, "alice")
	srv.CreateRepo(t, "alice/game")
	data := randomBytes(500 << 10)
	work := lfsWork(t, env, map[string][]byte{"big.bin": data})
	env.Run(t, work, "push", "-q", srv.HTTPURL(tok, "alice/game"), "main")
	srv.Admin(t, "fork", "alice/game", "alice/fork")
	srv.Admin(t, "delete-repo", "alice/game")
	st := openStore(t, srv)
	if keys := lfsKeys(t, st, "alice/game"); len(keys) != 0 {
		t.Fatalf("delete-repo left %v", keys)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	env.Run(t, "", "clone", "-q", srv.HTTPURL(tok, "alice/fork"), clone)
	sameFile(t, filepath.Join(clone, "big.bin"), data)
	srv.Admin(t, "delete-repo", "alice/fork")
	if keys := lfsKeys(t, st, "alice/fork"); len(keys) != 0 {
		t.Fatalf("delete-repo left %v", keys)
	}
}
