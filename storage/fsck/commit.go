package fsck

import (
	"bytes"
	"math"
)

// This file mirrors git's fsck_commit, fsck_tag_standalone, fsck_ident and
// verify_headers. As in git, a finding stops the check unless it is
// skipped, in which case parsing goes on where git's would.

// verifyHeaders rejects a NUL before the end of the header block and a
// header block whose last line is not terminated.
func verifyHeaders(r *report, data []byte) bool {
	for i, b := range data {
		switch b {
		case 0:
			r.add(NulInHeader, "unterminated header: NUL at offset %d", i)
			return false
		case '\n':
			if i+1 < len(data) && data[i+1] == '\n' {
				return true
			}
		}
	}
	if len(data) > 0 && data[len(data)-1] == '\n' {
		return true
	}
	r.add(UnterminatedHeader, "unterminated header")
	return false
}

// splitLine returns b up to the first '\n' and the rest after it; ok is
// false if there is no '\n'.
func splitLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil, false
	}
	return b[:i], b[i+1:], true
}

// isHexID reports whether line is exactly 40 lowercase hex digits. Git
// also accepts uppercase here, but rgit's object parsers do not, and no
// git writes it.
func isHexID(line []byte) bool {
	if len(line) != 40 {
		return false
	}
	for _, c := range line {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func checkCommit(r *report, data []byte) {
	if !verifyHeaders(r, data) {
		return
	}
	rest, ok := bytes.CutPrefix(data, []byte("tree "))
	if !ok {
		r.add(MissingTree, "invalid format - expected 'tree' line")
		return
	}
	line, rest, _ := splitLine(rest)
	if !isHexID(line) {
		r.add(BadTreeSha1, "invalid 'tree' line format - bad sha1")
		return
	}
	for {
		after, ok := bytes.CutPrefix(rest, []byte("parent "))
		if !ok {
			break
		}
		line, rest, _ = splitLine(after)
		if !isHexID(line) {
			r.add(BadParentSha1, "invalid 'parent' line format - bad sha1")
			return
		}
	}
	authors := 0
	for {
		after, ok := bytes.CutPrefix(rest, []byte("author "))
		if !ok {
			break
		}
		authors++
		line, rest, _ = splitLine(after)
		if checkIdent(r, line) {
			return
		}
	}
	switch {
	case authors == 0 && r.add(MissingAuthor, "invalid format - expected 'author' line"):
		return
	case authors > 1 && r.add(MultipleAuthors, "invalid format - multiple 'author' lines"):
		return
	}
	after, ok := bytes.CutPrefix(rest, []byte("committer "))
	if !ok {
		r.add(MissingCommitter, "invalid format - expected 'committer' line")
		return
	}
	line, _, _ = splitLine(after)
	if checkIdent(r, line) {
		return
	}
	if bytes.IndexByte(data, 0) >= 0 {
		r.add(NulInCommit, "NUL byte in the commit object body")
	}
}

var tagTypes = map[string]bool{"commit": true, "tree": true, "blob": true, "tag": true}

func checkTag(r *report, data []byte) {
	if !verifyHeaders(r, data) {
		return
	}
	rest, ok := bytes.CutPrefix(data, []byte("object "))
	if !ok {
		r.add(MissingObject, "invalid format - expected 'object' line")
		return
	}
	line, rest, _ := splitLine(rest)
	if !isHexID(line) {
		r.add(BadObjectSha1, "invalid 'object' line format - bad sha1")
		return
	}
	rest, ok = bytes.CutPrefix(rest, []byte("type "))
	if !ok {
		r.add(MissingTypeEntry, "invalid format - expected 'type' line")
		return
	}
	line, rest, ok = splitLine(rest)
	if !ok {
		r.add(MissingType, "invalid format - unexpected end after 'type' line")
		return
	}
	if !tagTypes[string(line)] {
		r.add(BadType, "invalid 'type' value")
		return
	}
	rest, ok = bytes.CutPrefix(rest, []byte("tag "))
	if !ok {
		r.add(MissingTagEntry, "invalid format - expected 'tag' line")
		return
	}
	line, rest, ok = splitLine(rest)
	if !ok {
		r.add(MissingTag, "invalid format - unexpected end after 'tag' line")
		return
	}
	if !validTagName(line) && r.add(BadTagName, "invalid 'tag' name: %q", line) {
		return
	}
	after, ok := bytes.CutPrefix(rest, []byte("tagger "))
	if !ok {
		// Early tags (git's own v0.99) have no tagger.
		r.add(MissingTaggerEntry, "invalid format - expected 'tagger' line")
		return
	}
	line, _, _ = splitLine(after)
	checkIdent(r, line)
}

// checkIdent checks "Name <email> 1234567890 +0000" (line without its
// '\n') and reports whether a finding rejected the object.
func checkIdent(r *report, line []byte) bool {
	// at treats the end of the line as git's terminating '\n'.
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return '\n'
	}
	if at(0) == '<' {
		return r.add(MissingNameBeforeEmail, "invalid author/committer line - missing space before email")
	}
	p := 0
	for ; at(p) != '<'; p++ {
		switch at(p) {
		case '\n':
			return r.add(MissingEmail, "invalid author/committer line - missing email")
		case '>':
			return r.add(BadName, "invalid author/committer line - bad name")
		}
	}
	if at(p-1) != ' ' {
		return r.add(MissingSpaceBeforeEmail, "invalid author/committer line - missing space before email")
	}
	for p++; at(p) != '>'; p++ {
		if c := at(p); c == '<' || c == '\n' {
			return r.add(BadEmail, "invalid author/committer line - bad email")
		}
	}
	p++
	if at(p) != ' ' {
		return r.add(MissingSpaceBeforeDate, "invalid author/committer line - missing space before date")
	}
	p++
	if at(p) == '0' && at(p+1) != ' ' {
		return r.add(ZeroPaddedDate, "invalid author/committer line - zero-padded date")
	}
	if !isDigit(at(p)) {
		return r.add(BadDate, "invalid author/committer line - bad date")
	}
	var t uint64
	overflow := false
	for ; isDigit(at(p)); p++ {
		d := uint64(at(p) - '0')
		if t > (math.MaxInt64-d)/10 {
			overflow = true
		}
		t = t*10 + d
	}
	if overflow {
		return r.add(BadDateOverflow, "invalid author/committer line - date causes integer overflow")
	}
	if at(p) != ' ' {
		return r.add(BadDate, "invalid author/committer line - bad date")
	}
	p++
	if c := at(p); c != '+' && c != '-' ||
		!isDigit(at(p+1)) || !isDigit(at(p+2)) || !isDigit(at(p+3)) || !isDigit(at(p+4)) ||
		p+5 != len(line) {
		return r.add(BadTimezone, "invalid author/committer line - bad time zone")
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// validTagName reports whether "refs/tags/"+name is a valid ref name
// (git's check_refname_format without flags).
func validTagName(name []byte) bool {
	if len(name) == 0 || name[len(name)-1] == '.' {
		return false
	}
	for comp := range bytes.SplitSeq(name, []byte("/")) {
		if len(comp) == 0 || comp[0] == '.' || bytes.HasSuffix(comp, []byte(".lock")) ||
			bytes.Contains(comp, []byte("..")) || bytes.Contains(comp, []byte("@{")) {
			return false
		}
		for _, c := range comp {
			if c < 0x20 || c == 0x7f || bytes.IndexByte([]byte(" :?[\\^~*"), c) >= 0 {
				return false
			}
		}
	}
	return true
}
