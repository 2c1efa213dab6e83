package lfs

import (
	"strings"
	"testing"
)

func TestParsePointer(t *testing.T) {
	oid := strings.Repeat("ab", 32)
	good := "version https://git-lfs.github.com/spec/v1\noid sha256:" + oid + "\nsize 12345\n"
	for _, c := range []struct {
		name, data string
		ok         bool
	}{
		{"pointer", good, true},
		{"with extension", "version https://git-lfs.github.com/spec/v1\next-0-foo sha256:" + oid + "\noid sha256:" + oid + "\nsize 1\n", true},
		{"old version url", strings.Replace(good, "git-lfs", "hawser", 1), true},
		{"no final newline", strings.TrimSuffix(good, "\n"), false},
		{"crlf", strings.ReplaceAll(good, "\n", "\r\n"), false},
		{"keys out of order", "version https://git-lfs.github.com/spec/v1\nsize 1\noid sha256:" + oid + "\n", false},
		{"no size", "version https://git-lfs.github.com/spec/v1\noid sha256:" + oid + "\n", false},
		{"uppercase oid", strings.Replace(good, oid, strings.ToUpper(oid), 1), false},
		{"other hash", strings.Replace(good, "sha256:", "sha1:", 1), false},
		{"negative size", strings.Replace(good, "12345", "-1", 1), false},
		{"padded size", strings.Replace(good, "12345", "012345", 1), false},
		{"text file", "hello\n", false},
		{"too big", good + strings.Repeat("x", MaxPointerSize), false},
	} {
		p, ok := ParsePointer([]byte(c.data))
		if ok != c.ok {
			t.Errorf("%s: ok = %v, want %v", c.name, ok, c.ok)
		}
		if ok && c.name == "pointer" && (p.OID != oid || p.Size != 12345) {
			t.Errorf("%s: %+v", c.name, p)
		}
	}
}
