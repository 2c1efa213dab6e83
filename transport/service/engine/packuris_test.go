package engine

import "testing"

// TestRebaseURL: a base replaces the presigned URL's scheme and authority
// only; the path and the signed query stay byte for byte (escapes
// included), behind the base's prefix.
func TestRebaseURL(t *testing.T) {
	const signed = "http://127.0.0.1:7070/bucket/repos/a%2Bb/pack-1.pack?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=600&X-Amz-Signature=abc%2F"
	for _, c := range []struct{ base, want string }{
		{"", signed},
		{"https://cdn.example.com", "https://cdn.example.com/bucket/repos/a%2Bb/pack-1.pack?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=600&X-Amz-Signature=abc%2F"},
		{"http://proxy:8080/git/packs", "http://proxy:8080/git/packs/bucket/repos/a%2Bb/pack-1.pack?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=600&X-Amz-Signature=abc%2F"},
	} {
		if got, err := RebaseURL(signed, c.base); err != nil || got != c.want {
			t.Errorf("base %q: %q, %v; want %q", c.base, got, err, c.want)
		}
	}
	for _, bad := range []string{"http://u:p@store/bucket/k", "http://store", "::"} {
		if got, err := RebaseURL(bad, "https://cdn.example.com"); err == nil {
			t.Errorf("%q rebased to %q", bad, got)
		}
	}
}
