package api

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

const oidA = "0123456789abcdef0123456789abcdef01234567"
const oidB = "89abcdef0123456789abcdef0123456789abcdef"

// TestParseRequest: one parse drives access, cache key and upstream
// path; segments are decoded exactly once and the dangerous ones refused.
func TestParseRequest(t *testing.T) {
	ok := []struct {
		path, query string
		suffix      string // CacheSuffix, which is also the tail of Path()
	}{
		{"/api/alice/site/refs", "", "refs"},
		{"/api/Alice/site.git/refs", "", "refs"},
		{"/api/alice/site/tree/" + oidA, "", "tree/" + oidA},
		{"/api/alice/site/tree/" + oidA + "/src/main.go", "", "tree/" + oidA + "/src/main.go"},
		{"/api/alice/site/blob/" + oidA + "/a%20b.txt", "", "blob/" + oidA + "/a%20b.txt"},
		{"/api/alice/site/raw/" + oidA + "/%25", "", "raw/" + oidA + "/%25"},
		{"/api/alice/site/log/" + oidA, "", "log/" + oidA + "?n=50"},
		{"/api/alice/site/log/" + oidA, "n=0", "log/" + oidA + "?n=1"},
		{"/api/alice/site/log/" + oidA, "n=99999999999999999999999", "log/" + oidA + "?n=200"},
		{"/api/alice/site/log/" + oidA, "n=7&path=src/x.go", "log/" + oidA + "?n=7&path=src%2Fx.go"},
		{"/api/alice/site/commit/" + oidA, "", "commit/" + oidA},
		{"/api/alice/site/compare/" + oidA + "..." + oidB, "", "compare/" + oidA + "..." + oidB},
		{"/api/alice/site/archive/" + oidA + ".tar.gz", "", "archive/" + oidA + ".tar.gz"},
		{"/api/alice/site/archive/" + oidA + ".zip", "", "archive/" + oidA + ".zip"},
		{"/api/alice/site/blame/" + oidA + "/src/a%20b.go", "", "blame/" + oidA + "/src/a%20b.go"},
		{"/api/alice/site/tag/" + oidA, "", "tag/" + oidA},
		{"/api/alice/site/ahead-behind/" + oidA + "..." + oidB, "", "ahead-behind/" + oidA + "..." + oidB},
		{"/api/alice/site/ahead-behind/" + oidA + "..." + oidB + "," + oidA, "", "ahead-behind/" + oidA + "..." + oidB + "," + oidA},
		{"/api/alice/site/ahead-behind/" + oidA + "..." + strings.Repeat(oidB+",", MaxAheadBehindHeads-1) + oidB, "",
			"ahead-behind/" + oidA + "..." + strings.Repeat(oidB+",", MaxAheadBehindHeads-1) + oidB},
		{"/api/alice/site/commits/" + oidA, "", "commits/" + oidA},
		{"/api/alice/site/commits/" + oidA + "%2C" + oidB, "", "commits/" + oidA + "," + oidB},
		{"/api/alice/site/commits/" + strings.Repeat(oidB+",", MaxCommits-1) + oidB, "", "commits/" + strings.Repeat(oidB+",", MaxCommits-1) + oidB},
	}
	for _, c := range ok {
		v, _ := url.ParseQuery(c.query)
		q, err := ParseRequest(c.path, v)
		if err != nil {
			t.Errorf("%s?%s: %v", c.path, c.query, err)
			continue
		}
		if got := q.CacheSuffix(); got != c.suffix {
			t.Errorf("%s?%s: suffix %q, want %q", c.path, c.query, got, c.suffix)
		}
		// The upstream path parses back to the same request.
		p, qs, _ := strings.Cut(q.Path(), "?")
		v2, _ := url.ParseQuery(qs)
		q2, err := ParseRequest(p, v2)
		if err != nil || q2.CacheSuffix() != q.CacheSuffix() || q2.Repo != q.Repo {
			t.Errorf("%s: Path() %q does not round-trip: %v", c.path, q.Path(), err)
		}
	}
	bad := []struct{ path, query string }{
		{"/api/alice/site", ""},
		{"/api/alice/site/", ""},
		{"/api/alice/site/refs/", ""},
		{"/api/alice/site/refs/x", ""},
		{"/api/alice/site/nope", ""},
		{"/api/alice/site/tree", ""},
		{"/api/alice/site/ahead-behind", ""},
		{"/api/alice/site/ahead-behind/" + oidA, ""},
		{"/api/alice/site/ahead-behind/" + oidA + "..." + oidB + ",", ""},
		{"/api/alice/site/ahead-behind/" + oidA + "..." + strings.Repeat(oidB+",", MaxAheadBehindHeads) + oidB, ""},
		{"/api/alice/site/commits", ""},
		{"/api/alice/site/commits/" + oidA + ",", ""},
		{"/api/alice/site/commits/" + oidA + "/x", ""},
		{"/api/alice/site/commits/" + strings.Repeat(oidB+",", MaxCommits) + oidB, ""},
		{"/api/alice/site/compare/" + oidA + "..." + oidB + "," + oidA, ""},
		{"/api/alice/site/tag/" + oidA + "/x", ""},
		{"/api/alice/site/tree/" + oidA[:39], ""},
		{"/api/alice/site/tree/" + strings.ToUpper(oidA), ""},
		{"/api/alice/site/tree/" + oidA + "/..", ""},
		{"/api/alice/site/tree/" + oidA + "/%2e%2e", ""},
		{"/api/alice/site/tree/" + oidA + "/.", ""},
		{"/api/alice/site/tree/" + oidA + "//x", ""},
		{"/api/alice/site/tree/" + oidA + "/a%2fb", ""},
		{"/api/alice/site/tree/" + oidA + "/a%5cb", ""},
		{"/api/alice/site/tree/" + oidA + "/a%00", ""},
		{"/api/alice/site/tree/" + oidA + "/a%zz", ""},
		{"/api/alice/site/log/" + oidA, "n=x"},
		{"/api/alice/site/log/" + oidA, "path=../etc"},
		{"/api/alice/site/log/" + oidA, "path=a//b"},
		{"/api/alice/site/log/" + oidA + "/x", ""},
		{"/api/alice/site/compare/" + oidA, ""},
		{"/api/alice/site/compare/" + oidA + ".." + oidB, ""},
		{"/api/alice/site/archive/" + oidA, ""},
		{"/api/alice/site/archive/" + oidA + ".tar", ""},
		{"/api/alice/site/blame/" + oidA, ""},
		{"/api/alice/site/blame/" + oidA + "/..", ""},
		{"/api/api/site/refs", ""},
		{"/api/al%2fice/site/refs", ""},
		{"/api/../site/refs", ""},
		{"/api/alice/.git/refs", ""},
		{"/repo/alice/site/refs", ""},
	}
	for _, c := range bad {
		v, _ := url.ParseQuery(c.query)
		if q, err := ParseRequest(c.path, v); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s?%s: %+v, %v; want ErrBadRequest", c.path, c.query, q, err)
		}
	}
}

// TestPolicyOK: only policies that never evict keys without a TTL keep
// generation counters safe.
func TestPolicyOK(t *testing.T) {
	for p, want := range map[string]bool{
		"volatile-lru": true, "volatile-lfu": true, "volatile-ttl": true, "volatile-random": true,
		"allkeys-lru": false, "allkeys-lfu": false, "allkeys-random": false, "noeviction": false, "": false,
	} {
		if PolicyOK(p) != want {
			t.Errorf("PolicyOK(%q) = %v", p, !want)
		}
	}
}
