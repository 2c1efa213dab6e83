package gitproto

import "strings"

// checkRefName applies git check-ref-format rules to a ref name a client
// wants to update and returns "" when it is acceptable, else git's reason
// text for the report ("funny refname").
func checkRefName(name string) string {
	if len(name) > MaxRefNameLen {
		return (&LimitError{What: "refname too long", Limit: MaxRefNameLen, Unit: "bytes"}).Error()
	}
	if !validRefName(name) {
		return "funny refname"
	}
	return ""
}

// validRefName reports whether name is a full ref name under refs/ that
// git check-ref-format accepts.
func validRefName(name string) bool {
	if !strings.HasPrefix(name, "refs/") || len(name) > MaxRefNameLen {
		return false
	}
	if strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.HasSuffix(name, ".") {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c < 0x20 || c == 0x7f:
			return false
		case c == ' ' || c == '~' || c == '^' || c == ':' || c == '?' || c == '*' || c == '[' || c == '\\':
			return false
		}
	}
	for _, comp := range strings.Split(name, "/") {
		if comp == "" || comp[0] == '.' || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}
