package web_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/rgit/rgit/testkit/gitenv"
)

// TestPrivateRepositoryInvisibleToOthers runs the page on a real node, so
// the access decision is the node's own (the read API's gate), not a
// stand-in: alice's private repository shows to alice, and to bob, to an
// anonymous visitor and to a holder of a bad token every view of it
// (front, tree, blob, raw, blame, history, commit, compare, archive) is the very
// page a missing repository gives, and the repository list leaves it out.
func TestPrivateRepositoryInvisibleToOthers(t *testing.T) {
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	env := gitenv.New(t)
	alice, bob := srv.AddToken(t, "alice"), srv.AddToken(t, "bob")
	srv.CreateRepo(t, "alice/secret")
	wt := env.Scratch(t)
	first := env.Commit(t, wt, "first", map[string]string{"secret.txt": "nobody else\n"})
	tip := env.Commit(t, wt, "second", map[string]string{"dir/more.txt": "still nobody\n"})
	env.Run(t, wt, "push", "-q", srv.HTTPURL(alice, "alice/secret"), "HEAD:refs/heads/main")
	base := "http://" + srv.HTTPAddr

	views := []string{
		"", "/tree/" + tip, "/tree/" + tip + "/dir", "/blob/" + tip + "/secret.txt", "/raw/" + tip + "/secret.txt",
		"/blame/" + tip + "/secret.txt", "/commits/" + tip, "/commit/" + tip, "/compare?base=" + first + "&head=" + tip, "/archive/" + tip + ".tar.gz",
	}
	for _, who := range []struct {
		name, token string
		sees        bool
	}{{"alice", alice, true}, {"bob", bob, false}, {"anonymous", "", false}, {"bad token", "x" + bob, false}} {
		t.Run(who.name, func(t *testing.T) {
			c := signedIn(t, base, who.token)
			for _, v := range views {
				status, page := fetch(t, c, base+"/alice/secret"+v)
				if who.sees {
					if status != http.StatusOK {
						t.Errorf("%s: alice/secret%s answered %d", who.name, v, status)
					}
					continue
				}
				mStatus, missing := fetch(t, c, base+"/alice/no-such-repo"+v)
				if status != http.StatusNotFound || status != mStatus || page != missing {
					t.Errorf("alice/secret%s to %s: %d, a missing repository %d; pages equal: %v\n%s",
						v, who.name, status, mStatus, page == missing, page)
				}
				if strings.Contains(page, "nobody else") || strings.Contains(page, "more.txt") {
					t.Errorf("alice/secret%s to %s shows its content", v, who.name)
				}
			}
			if _, list := fetch(t, c, base+"/"); strings.Contains(list, "alice/secret") != who.sees {
				t.Errorf("the list to %s shows alice/secret: %v", who.name, !who.sees)
			}
		})
	}
}

// signedIn returns a client holding the page's cookies for token ("" for
// none); a token the node does not accept leaves it signed out.
func signedIn(t *testing.T, base, token string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	if token == "" {
		return c
	}
	resp, err := c.PostForm(base+"/-/signin", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c
}

func fetch(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
