package fsck

import "testing"

// Spellings git treats as .git (hasDotgit).
var dangerousDotGit = []string{
	".git", ".GIT", ".Git", ".gIt",
	"git~1", "GIT~1", "Git~1",
	".git.", ".git ", ".git. . .", ".git..", ".git  ",
	".git::$INDEX_ALLOCATION", ".git:", ".git:foo", ".GIT::$index_allocation",
	"git~1.", "git~1 ", "git~1::$INDEX_ALLOCATION",
	".g\u200cit", ".g\u200dit", "\u200e.git", ".git\u200f", "\u202a.git", ".gi\u202et",
	".\u206agit", ".git\u206f", "\ufeff.git", ".\u200c\u200dg\ufeffit\u200e",
	".G\u200cIT",
	".git\xff",   // invalid UTF-8 after .git: git's HFS check stops there too
	".git\\foo",  // a Windows path under .git
	"git~1\\foo", // likewise for the short name
}

// Lookalikes git accepts.
var safeDotGit = []string{
	".gitfoo", ".git-credentials", ".gitignore", ".gitmodules", ".gitattributes",
	"git", "git~2", "git~10", "git~1x", ".gi", "..git", "git.", "-git", "_git",
	".g\xffit", ".gi\u200bt", // U+200B is not ignorable
	".git\u00e9", "foo.git", ".gitx ", "git~",
}

func TestDotGitNames(t *testing.T) {
	for _, n := range dangerousDotGit {
		if !isDotGit([]byte(n)) {
			t.Errorf("isDotGit(%q) = false, want true", n)
		}
	}
	for _, n := range safeDotGit {
		if isDotGit([]byte(n)) {
			t.Errorf("isDotGit(%q) = true, want false", n)
		}
	}
}

func TestDotfileNames(t *testing.T) {
	tests := []struct {
		d          dotfile
		bad, other []string
	}{
		{dotGitmodules,
			[]string{".gitmodules", ".GITMODULES", ".GitModules", ".gitmodules ", ".gitmodules.",
				".gitmodules . .", ".gitmodules:$DATA", ".gitmodules::$DATA", ".git\u200cmodules",
				"\u200e.gitmodules", "GITMOD~1", "gitmod~1", "gitmod~4", "GITMOD~4 .", "gi7eba~1",
				"GI7EBA~1", "gi7eba~9", "gi7eb~12", "gi7e~123", "gi7eba~1:stream"},
			[]string{".gitmodulesx", ".gitmodule", "gitmod~5", "gitmod~0", "gi7eba~0", "gitmodules",
				"gi7eba~1x", "gi7ebax~1", "gi7eba", ".gitmodules\u200b", "gi\xe97eba~1"}},
		{dotGitattributes,
			[]string{".gitattributes", ".GITATTRIBUTES", "GITATT~1", "gitatt~2", "gi7d29~1", ".gitattributes "},
			[]string{".gitattribute", "gi7d28~1", "gitatt~5"}},
		{dotGitignore,
			[]string{".gitignore", ".GitIgnore", "GITIGN~1", "gi250a~1", ".gitignore."},
			[]string{".gitignorex", "gi250b~1"}},
		{dotMailmap,
			[]string{".mailmap", ".MAILMAP", "MAILMA~1", "maba30~1", ".mailmap:x"},
			[]string{".mailmapx", "mailmap", "maba31~1"}},
	}
	for _, tc := range tests {
		for _, n := range tc.bad {
			if !tc.d.is([]byte(n)) {
				t.Errorf("%s.is(%q) = false, want true", tc.d.name, n)
			}
		}
		for _, n := range tc.other {
			if tc.d.is([]byte(n)) {
				t.Errorf("%s.is(%q) = true, want false", tc.d.name, n)
			}
		}
	}
}
