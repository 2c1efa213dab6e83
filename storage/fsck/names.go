package fsck

import "unicode/utf8"

// This file recognises the tree entry names that git refuses to check out
// because a case-insensitive or normalising file system (HFS+, NTFS) would
// map them onto ".git" or onto one of the special dotfiles. The functions
// mirror git's utf8.c (is_hfs_dot*, is_ntfs_dot*) rule for rule: a name
// that git considers dangerous must be rejected here, and a name that git
// accepts must not be, or real repositories would fail to push.

// nextHFSRune decodes the next rune of s, skipping the code points HFS+
// ignores when comparing names. It returns 0 at the end of s and also for
// invalid UTF-8 (which can then never match an ASCII needle).
func nextHFSRune(s []byte) (r rune, rest []byte) {
	for {
		if len(s) == 0 {
			return 0, nil
		}
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n <= 1 {
			return 0, nil
		}
		s = s[n:]
		if hfsIgnorable(r) {
			continue
		}
		return r, s
	}
}

// hfsIgnorable lists the code points HFS+ drops from names.
func hfsIgnorable(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, // zero-width (non-)joiner, LRM, RLM
		r >= 0x202a && r <= 0x202e, // bidi embedding and overrides
		r >= 0x206a && r <= 0x206f, // deprecated format characters
		r == 0xfeff:                // zero-width no-break space (BOM)
		return true
	}
	return false
}

// isHFSDot reports whether name is "." + needle (needle lowercase ASCII)
// once HFS+ ignorable code points are dropped and case is folded, optionally
// followed by a '/' (is_hfs_dot_generic).
func isHFSDot(name []byte, needle string) bool {
	r, rest := nextHFSRune(name)
	if r != '.' {
		return false
	}
	for i := 0; i < len(needle); i++ {
		r, rest = nextHFSRune(rest)
		if r > 127 || lowerASCII(byte(r)) != needle[i] {
			return false
		}
	}
	r, _ = nextHFSRune(rest)
	return r == 0 || r == '/'
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasPrefixFold reports whether s starts with the lowercase ASCII prefix,
// ignoring ASCII case.
func hasPrefixFold(s []byte, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if lowerASCII(s[i]) != prefix[i] {
			return false
		}
	}
	return true
}

func isXPlatformDirSep(c byte) bool { return c == '/' || c == '\\' }

// isNTFSDotGit reports whether name, up to its first path separator or
// ':', is ".git" or its 8.3 short name "git~1" followed only by spaces and
// periods, which NTFS strips (is_ntfs_dotgit). A ':' starts an alternate
// data stream, so ".git::$INDEX_ALLOCATION" names the directory itself.
func isNTFSDotGit(name []byte) bool {
	var i int
	switch {
	case hasPrefixFold(name, ".git"):
		i = 4
	case hasPrefixFold(name, "git~1"):
		i = 5
	default:
		return false
	}
	for ; i < len(name); i++ {
		c := name[i]
		if isXPlatformDirSep(c) || c == ':' {
			return true
		}
		if c != '.' && c != ' ' {
			return false
		}
	}
	return true
}

// onlySpacesAndPeriods reports whether s[i:] up to the end or a ':' holds
// only spaces and periods.
func onlySpacesAndPeriods(s []byte, i int) bool {
	for ; i < len(s); i++ {
		c := s[i]
		if c == ':' {
			return true
		}
		if c != ' ' && c != '.' {
			return false
		}
	}
	return true
}

// isNTFSDot reports whether name is, to NTFS, "." + dotName (lowercase
// ASCII, at least 6 bytes long): the long name with trailing spaces and
// periods or a stream suffix, the regular short name (first six letters of
// dotName, '~', 1..4), or the hashed fallback short name built from
// shortPrefix, which git precomputes per file name (is_ntfs_dot_generic).
func isNTFSDot(name []byte, dotName, shortPrefix string) bool {
	if len(name) > 0 && name[0] == '.' && hasPrefixFold(name[1:], dotName) {
		return onlySpacesAndPeriods(name, 1+len(dotName))
	}
	if hasPrefixFold(name, dotName[:6]) && len(name) >= 8 && name[6] == '~' && name[7] >= '1' && name[7] <= '4' {
		return onlySpacesAndPeriods(name, 8)
	}
	// Fallback short name: up to six prefix characters, '~', a digit 1-9,
	// then digits, within the first eight bytes.
	sawTilde := false
	i := 0
	for ; i < 8; i++ {
		if i >= len(name) {
			return false
		}
		c := name[i]
		switch {
		case sawTilde:
			if c < '0' || c > '9' {
				return false
			}
		case c == '~':
			i++
			if i >= len(name) || name[i] < '1' || name[i] > '9' {
				return false
			}
			sawTilde = true
		case i >= 6, c&0x80 != 0, lowerASCII(c) != shortPrefix[i]:
			return false
		}
	}
	return onlySpacesAndPeriods(name, i)
}

// Dangerous dotfile families: name for HFS+/NTFS long forms and git's
// precomputed NTFS fallback short-name prefix.
type dotfile struct{ name, shortPrefix string }

var (
	dotGitmodules    = dotfile{"gitmodules", "gi7eba"}
	dotGitignore     = dotfile{"gitignore", "gi250a"}
	dotGitattributes = dotfile{"gitattributes", "gi7d29"}
	dotMailmap       = dotfile{"mailmap", "maba30"}
)

// mayBeSpecial is a fast filter: every name the predicates below accept
// starts with '.', a short-name letter ('g', 'm') or the lead byte of an
// HFS+-ignorable code point (U+200C.., U+202A.., U+206A.. are E2 xx xx,
// U+FEFF is EF BB BF).
func mayBeSpecial(name []byte) bool {
	if len(name) == 0 {
		return false
	}
	switch name[0] {
	case '.', 'g', 'G', 'm', 'M', 0xe2, 0xef:
		return true
	}
	return false
}

// isDotGit reports whether a tree entry name would be .git on some
// supported file system.
func isDotGit(name []byte) bool {
	return mayBeSpecial(name) && (isHFSDot(name, "git") || isNTFSDotGit(name))
}

// is reports whether name is the dotfile on HFS+ or NTFS.
func (d dotfile) is(name []byte) bool {
	return mayBeSpecial(name) && (isHFSDot(name, d.name) || isNTFSDot(name, d.name, d.shortPrefix))
}

// isNTFSOnly is the NTFS half of is, used on the parts of a name after a
// backslash (a directory separator on Windows only).
func (d dotfile) isNTFSOnly(name []byte) bool {
	return mayBeSpecial(name) && isNTFSDot(name, d.name, d.shortPrefix)
}
