package fsck

import (
	"strings"
)

// This file ports git's check_submodule_url (submodule-config.c) and the
// parts of url_normalize (urlmatch.c) it relies on. The attacks it stops:
// option injection ("-u..."), newlines smuggled to the credential helper
// (CVE-2020-5260), and relative or malformed http URLs that make
// git-remote-curl talk to the wrong host (CVE-2020-11008).

// validSubmoduleURL reports whether git would accept url in .gitmodules.
func validSubmoduleURL(url string) bool {
	if looksLikeOption(url) {
		return false
	}
	if isRelativeURL(url) || strings.HasPrefix(url, "git://") {
		// It may be appended to an http URL and url-decoded.
		if strings.IndexByte(urlDecode(url), '\n') >= 0 {
			return false
		}
		// "../" escaping the root can overwrite the host of the URL it
		// is resolved against (https::example.com, https:///example.com).
		n, next := countLeadingDotDots(url)
		return n == 0 || next == "" || next[0] != ':' && next[0] != '/'
	}
	if curl, ok := curlURL(url); ok {
		return validURLForm(curl) && strings.IndexByte(urlDecode(curl), '\n') < 0
	}
	return true
}

// startsWithDotSlash and startsWithDotDotSlash accept '/' and '\' alike
// (git's PATH_MATCH_XPLATFORM).
func startsWithDotSlash(s string) bool {
	return len(s) >= 2 && s[0] == '.' && isXPlatformDirSep(s[1])
}

func startsWithDotDotSlash(s string) bool {
	return len(s) >= 3 && s[0] == '.' && s[1] == '.' && isXPlatformDirSep(s[2])
}

func isRelativeURL(s string) bool { return startsWithDotSlash(s) || startsWithDotDotSlash(s) }

// countLeadingDotDots counts "../" at the start of url, skipping "./",
// and returns the remainder.
func countLeadingDotDots(url string) (int, string) {
	n := 0
	for {
		switch {
		case startsWithDotDotSlash(url):
			n++
			url = url[3:]
		case startsWithDotSlash(url):
			url = url[2:]
		default:
			return n, url
		}
	}
}

// curlURL returns the URL git-remote-curl would get, if url uses it.
func curlURL(url string) (string, bool) {
	for _, p := range []string{"http::", "https::", "ftp::", "ftps::"} {
		if rest, ok := strings.CutPrefix(url, p); ok {
			return rest, true
		}
	}
	for _, p := range []string{"http://", "https://", "ftp://", "ftps://"} {
		if strings.HasPrefix(url, p) {
			return url, true
		}
	}
	return "", false
}

// urlDecode decodes %XX escapes in one pass, leaving invalid escapes and
// %00 as they are (git's url_decode).
func urlDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, ok := hexByte(s[i+1], s[i+2]); ok && v != 0 {
				b.WriteByte(v)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hexByte(hi, lo byte) (byte, bool) {
	h, ok1 := hexVal(hi)
	l, ok2 := hexVal(lo)
	return h<<4 | l, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const (
	urlSchemeChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-"
	urlHostChars   = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_[:]"
)

// validURLForm reports whether git's url_normalize accepts url: a scheme
// and "://", a host (required: no curl scheme is file:), a port in
// 1..65535 if any, well-formed %-escapes, and no ".." path segment above
// the root. Normalising does not change whether the decoded URL holds a
// newline, so the caller checks that on the original.
func validURLForm(url string) bool {
	n := span(url, urlSchemeChars)
	if n == 0 || !isAlpha(url[0]) || !strings.HasPrefix(url[n:], "://") {
		return false
	}
	url = url[n+3:]
	end := strings.IndexAny(url, "/?#")
	if end < 0 {
		end = len(url)
	}
	if at := strings.IndexByte(url, '@'); at >= 0 && at < end {
		if !validEscapes(url[:at]) {
			return false
		}
		url = url[at+1:]
		end -= at + 1
	}
	if end == 0 || url[0] == ':' {
		return false // missing host
	}
	// The port starts at the last ':' not inside an IPv6 literal.
	colon := end
	for i := end - 1; i > 0; i-- {
		if url[i] == ']' {
			break
		}
		if url[i] == ':' {
			colon = i
			break
		}
	}
	if span(url[:colon], urlHostChars) < colon {
		return false // invalid characters in host name
	}
	if colon < end && !validPort(url[colon+1:end]) {
		return false
	}
	url = url[end:]
	if strings.HasPrefix(url, "/") {
		pathEnd := strings.IndexAny(url, "?#")
		if pathEnd < 0 {
			pathEnd = len(url)
		}
		if !validPath(url[1:pathEnd]) {
			return false
		}
		url = url[pathEnd:]
	}
	return validEscapes(url) // query and fragment
}

func span(s, chars string) int {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(chars, s[i]) < 0 {
			return i
		}
	}
	return len(s)
}

// validPort accepts "" (the default port) and 1..65535 with optional
// leading zeros; like git it refuses an all-zero port.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	if span(p, "0123456789") < len(p) {
		return false
	}
	p = strings.TrimLeft(p, "0")
	if p == "" || len(p) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		n = n*10 + int(p[i]-'0')
	}
	return n <= 65535
}

// validPath resolves "." and ".." segments (after unescaping, as RFC 3986
// asks) and fails if ".." would climb above the root.
func validPath(path string) bool {
	depth := 0
	for seg := range strings.SplitSeq(path, "/") {
		if !validEscapes(seg) {
			return false
		}
		switch unescapeUnreserved(seg) {
		case ".":
		case "..":
			if depth == 0 {
				return false
			}
			depth--
		default:
			depth++
		}
	}
	return true
}

// validEscapes reports whether every '%' starts a two-hex-digit escape.
func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) {
				return false
			}
			if _, ok := hexByte(s[i+1], s[i+2]); !ok {
				return false
			}
			i += 2
		}
	}
	return true
}

// unescapeUnreserved decodes escapes of RFC 3986 unreserved characters,
// which url_normalize writes literally (so "%2e%2e" is "..").
func unescapeUnreserved(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, ok := hexByte(s[i+1], s[i+2]); ok && isUnreserved(v) {
				b.WriteByte(v)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}
