package fsck

import (
	"testing"

	"github.com/rgit/rgit/storage/object"
)

func sub(body string) string { return "[submodule \"lib\"]\n\tpath = lib\n" + body }

// gitmodulesCases each trigger one check (want) or none.
var gitmodulesCases = []struct {
	name, data, want string
}{
	{"valid", sub("\turl = https://example.com/lib.git\n"), ""},
	{"valid several", "[submodule \"a\"]\n\tpath = a\n\turl = ../a.git\n[submodule \"b/c\"]\n\tpath = b/c\n\turl = git@host:b.git\n\tbranch = main\n\tupdate = rebase\n", ""},
	{"valid comments and quoting", "# c\n; c\n[submodule \"x\"] # c\n\turl = \"https://h/x.git\" ; c\n\tpath = a\\\\b\n", ""},
	{"valid continuation", "[submodule \"x\"]\n\turl = https://h/\\\nx.git\n", ""},
	{"valid crlf", "[submodule \"x\"]\r\n\turl = https://h/x\r\n", ""},
	{"parse bom", "\xef\xbb\xbf[submodule \"x\"]\n\turl = https://h/x\n", GitmodulesParse},
	{"valid old-style section", "[submodule.x]\n\turl = ./x\n", ""},
	{"valid other sections", "[core]\n\tbare\n[remote \"..\"]\n\turl = -x\n", ""},
	{"valid bare key", "[submodule \"x\"]\n\turl\n", ""},
	{"empty file", "", ""},
	{"name dotdot", "[submodule \"..\"]\n\tpath = x\n", GitmodulesName},
	{"name traversal", "[submodule \"../../.git/hooks\"]\n\tpath = x\n", GitmodulesName},
	{"name inner dotdot", "[submodule \"a/../b\"]\n\tpath = x\n", GitmodulesName},
	{"name backslash dotdot", "[submodule \"a\\\\..\\\\b\"]\n\tpath = x\n", GitmodulesName},
	{"name trailing dotdot", "[submodule \"a/..\"]\n\tpath = x\n", GitmodulesName},
	{"name empty", "[submodule \"\"]\n\tpath = x\n", GitmodulesName},
	{"name absolute", "[submodule \"/etc\"]\n\tpath = x\n", GitmodulesName},
	{"name drive", "[submodule \"C:x\"]\n\tpath = x\n", GitmodulesName},
	{"name dots ok", "[submodule \"a..b/...\"]\n\tpath = x\n", ""},
	{"name with dots in key form", "[submodule \"a.b.c\"]\n\turl = -x\n", GitmodulesURL},
	{"url option", sub("\turl = -upload-pack=touch /tmp/pwned\n"), GitmodulesURL},
	{"url option quoted", sub("\turl = \"-u\"\n"), GitmodulesURL},
	{"url case-insensitive key", "[SubModule \"x\"]\n\tURL = --foo\n", GitmodulesURL},
	{"url same line as header", "[submodule \"x\"] url = -x\n", GitmodulesURL},
	{"url relative newline", sub("\turl = ./%0ahost=two.example.com/foo.git\n"), GitmodulesURL},
	{"url git newline", sub("\turl = git://a/%0A\n"), GitmodulesURL},
	{"url relative escapes host", sub("\turl = ../../../../../:localhost:8080\n"), GitmodulesURL},
	{"url relative escapes slash", sub("\turl = ../..//example.com\n"), GitmodulesURL},
	{"url relative backslash", sub("\turl = ..\\\\../:x\n"), GitmodulesURL},
	{"url relative ok", sub("\turl = ../../other.git\n"), ""},
	{"url https newline", sub("\turl = https://one.example.com:443?%0ahost=two.example.com/\n"), GitmodulesURL},
	{"url http:: newline", sub("\turl = http::https://example.com/%0a\n"), GitmodulesURL},
	{"url raw newline", sub("\turl = \"https://example.com/\\nx\"\n"), GitmodulesURL},
	{"url missing host", sub("\turl = https:///example.com/\n"), GitmodulesURL},
	{"url curl missing host", sub("\turl = http::https:example.com/\n"), GitmodulesURL},
	{"url bad port", sub("\turl = http://example.com:test/\n"), GitmodulesURL},
	{"url zero port", sub("\turl = http://example.com:0/\n"), GitmodulesURL},
	{"url big port", sub("\turl = http://example.com:65536/\n"), GitmodulesURL},
	{"url bad host char", sub("\turl = http://exa%6dple.com/\n"), GitmodulesURL},
	{"url bad escape", sub("\turl = http://example.com/%zz\n"), GitmodulesURL},
	{"url dotdot above root", sub("\turl = http://example.com/a/../../x\n"), GitmodulesURL},
	{"url escaped dotdot above root", sub("\turl = http://example.com/%2e%2e/x\n"), GitmodulesURL},
	{"url ok port user ipv6", sub("\turl = https://user:pw@[::1]:8443/a/./b/../c.git?x=1#f\n"), ""},
	{"url ok empty port", sub("\turl = https://example.com:/x\n"), ""},
	{"url ssh is not checked further", sub("\turl = ssh://host/%0a\n"), ""},
	{"path option", "[submodule \"x\"]\n\tpath = -x\n", GitmodulesPath},
	{"update command", "[submodule \"x\"]\n\tupdate = !rm -rf ~\n", GitmodulesUpdate},
	{"update merge ok", "[submodule \"x\"]\n\tupdate = merge\n", ""},
	{"parse unterminated header", "[submodule \"x\"\n", GitmodulesParse},
	{"parse unterminated quote", "[submodule \"x\"]\n\turl = \"abc\n", GitmodulesParse},
	{"parse bad escape", "[submodule \"x\"]\n\tpath = a\\qb\n", GitmodulesParse},
	{"parse missing equals", "[submodule \"x\"]\n\tpath x\n", GitmodulesParse},
	{"parse garbage", "<<<<<<< HEAD\n", GitmodulesParse},
	{"parse high byte", "\xef\xbb[core]\n", GitmodulesParse},
	{"parse bad section char", "[sub_module]\n", GitmodulesParse},
	{"parse empty section", "[]\n", GitmodulesParse},
	{"entries before parse error checked", "[submodule \"x\"]\n\turl = -evil\n[broken\n", GitmodulesURL},
}

// needsGit244 lists cases git rejects only since 2.44, whose
// check_submodule_url validates curl URLs with url_normalize.
var needsGit244 = map[string]bool{
	"url bad port": true, "url bad host char": true, "url big port": true, "url zero port": true,
	"url dotdot above root": true, "url escaped dotdot above root": true, "url bad escape": true,
}

// rgitStricter lists gitmodulesCases where rgit deliberately rejects what
// git accepts.
var rgitStricter = map[string]bool{"name absolute": true, "name drive": true}

func TestGitmodulesChecks(t *testing.T) {
	for _, tc := range gitmodulesCases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(Options{Strict: true})
			id := object.Hash(object.Blob, []byte(tc.data))
			err := c.CheckGitmodules(id, []byte(tc.data))
			if got := checkName(t, err); got != tc.want {
				t.Fatalf("CheckGitmodules = %v, want check %q", err, tc.want)
			}
		})
	}
}

func TestGitmodulesParseSkippable(t *testing.T) {
	data := []byte("<<<<<<< HEAD\n")
	skip, err := ParseSkipList("gitmodulesParse")
	if err != nil {
		t.Fatal(err)
	}
	c := NewChecker(Options{Strict: true, Skip: skip})
	if err := c.CheckGitmodules(blobID, data); err != nil {
		t.Fatalf("skipped gitmodulesParse still fails: %v", err)
	}
}

func TestParseConfigValues(t *testing.T) {
	data := "[Sec \"Sub.Case\"]\n  Key = \"  a b \" c\\t#x\n\tk2 =  v  ; comment\n\tflag\n[a.B]\nk=\n"
	type kv struct {
		name, value string
		has         bool
	}
	var got []kv
	err := parseConfig([]byte(data), func(name string, value []byte, has bool) {
		got = append(got, kv{name, string(value), has})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []kv{
		{"sec.Sub.Case.key", "  a b  c\t", true},
		{"sec.Sub.Case.k2", "v", true},
		{"sec.Sub.Case.flag", "", false},
		{"a.b.k", "", true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestSubmoduleNamesAndURLs runs git's own lists from t7450.
func TestSubmoduleNamesAndURLs(t *testing.T) {
	for _, n := range []string{"valid", "valid/with/paths", "a..b", "..a", "a/..b"} {
		if !validSubmoduleName(n) {
			t.Errorf("name %q rejected", n)
		}
	}
	for _, n := range []string{"", "../foo", "/../foo", "..\\foo", "\\..\\foo", "foo/..", "foo/../",
		"foo\\..", "foo\\..\\", "foo/../bar", ".."} {
		if validSubmoduleName(n) {
			t.Errorf("name %q accepted", n)
		}
	}
	for _, u := range []string{"./bar/baz/foo.git", "https://example.com/foo.git",
		"http://example.com:80/deeper/foo.git", "git@example.com:a/b.git", "file:///srv/x.git"} {
		if !validSubmoduleURL(u) {
			t.Errorf("url %q rejected", u)
		}
	}
	for _, u := range []string{"-a./foo", "../../..//test/foo.git", "../../../../../:localhost:8080/foo.git",
		"..\\../.\\../:example.com/foo.git", "./%0ahost=example.com/foo.git",
		"https://one.example.com/evil?%0ahost=two.example.com", "https:///example.com/foo.git",
		"http://example.com:test/foo.git", "https::example.com/foo.git", "http:::example.com/foo.git"} {
		if validSubmoduleURL(u) {
			t.Errorf("url %q accepted", u)
		}
	}
}
