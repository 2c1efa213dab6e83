package fsck

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// checkGitmodules parses a .gitmodules blob with git's config syntax and
// checks every submodule.<name>.<key> entry (git's fsck_gitmodules_fn).
// Entries before a syntax error are still checked, as in git.
func checkGitmodules(r *report, data []byte) {
	err := parseConfig(data, func(name string, value []byte, hasValue bool) {
		sub, key, ok := submoduleKey(name)
		if !ok {
			return
		}
		if !validSubmoduleName(sub) {
			r.add(GitmodulesName, "disallowed submodule name: %q", sub)
		}
		if !hasValue {
			return
		}
		v := cString(value)
		switch key {
		case "url":
			if !validSubmoduleURL(v) {
				r.add(GitmodulesURL, "disallowed submodule url: %q", v)
			}
		case "path":
			if looksLikeOption(v) {
				r.add(GitmodulesPath, "disallowed submodule path: %q", v)
			}
		case "update":
			// "!cmd" runs cmd on "git submodule update".
			if len(v) > 0 && v[0] == '!' {
				r.add(GitmodulesUpdate, "disallowed submodule update setting: %q", v)
			}
		}
	})
	if err != nil {
		r.add(GitmodulesParse, "could not parse gitmodules blob: %v", err)
	}
}

// cString is b as git's C code sees it: up to the first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// submoduleKey splits "submodule.<name>.<key>" (git's parse_config_key;
// the name may contain dots, the key may not).
func submoduleKey(name string) (sub, key string, ok bool) {
	rest, ok := strings.CutPrefix(cString([]byte(name)), "submodule")
	if !ok || !strings.HasPrefix(rest, ".") {
		return "", "", false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot == 0 { // "submodule.<key>" has no name
		return "", "", false
	}
	return rest[1:dot], rest[dot+1:], true
}

// validSubmoduleName rejects names git refuses (empty, or with a ".."
// component, '/' and '\' both counting as separators: the name becomes a
// path under .git/modules). rgit also rejects absolute names ("/x", "\x",
// "C:x"), which git accepts, because they are never produced by
// "git submodule add" and only serve to confuse path joins.
func validSubmoduleName(name string) bool {
	if name == "" {
		return false
	}
	if isXPlatformDirSep(name[0]) || len(name) >= 2 && name[1] == ':' && isASCIILetter(name[0]) {
		return false
	}
	start := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || isXPlatformDirSep(name[i]) {
			if name[start:i] == ".." {
				return false
			}
			start = i + 1
		}
	}
	return true
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// looksLikeOption is git's looks_like_command_line_option.
func looksLikeOption(s string) bool { return len(s) > 0 && s[0] == '-' }

// errConfig is wrapped by every config syntax error.
var errConfig = errors.New("bad config syntax")

// configParser is a port of git's config.c reader (git_parse_source).
type configParser struct {
	data []byte
	pos  int
	eof  bool
	line int
}

// next returns the next byte, folding "\r\n" to '\n' and returning '\n'
// (with eof set) past the end, as git's get_next_char does.
func (p *configParser) next() byte {
	if p.pos >= len(p.data) {
		p.eof = true
		return '\n'
	}
	c := p.data[p.pos]
	p.pos++
	if c == '\r' && p.pos < len(p.data) && p.data[p.pos] == '\n' {
		p.pos++
		c = '\n'
	}
	if c == '\n' {
		p.line++
	}
	return c
}

// isConfigSpace is git's isspace (sane_ctype: space, \t, \n, \r).
func isConfigSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isAlpha(c byte) bool   { return isASCIILetter(c) }
func isKeyChar(c byte) bool { return isAlpha(c) || isDigit(c) || c == '-' }

// parseConfig calls fn for each variable, with name as git forms it
// ("section.subsection.key", section and key lowercased) and hasValue
// false for a bare "key" (boolean true).
func parseConfig(data []byte, fn func(name string, value []byte, hasValue bool)) error {
	// Unlike config files, git's blob reader never skips a UTF-8 BOM (it
	// compares signed chars), so a BOM is a syntax error here too.
	p := &configParser{data: data, line: 1}
	var base []byte // "section." or "section.subsection." or empty
	comment := false
	for {
		c := p.next()
		switch {
		case c == '\n':
			if p.eof {
				return nil
			}
			comment = false
		case comment, isConfigSpace(c):
		case c == '#' || c == ';':
			comment = true
		case c == '[':
			name, err := p.sectionHeader()
			if err != nil {
				return err
			}
			base = append(name, '.')
		case isAlpha(c):
			if err := p.variable(base, c, fn); err != nil {
				return err
			}
		default:
			return p.errorf("unexpected %q", c)
		}
	}
}

func (p *configParser) errorf(what string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", errConfig, p.line, fmt.Sprintf(what, args...))
}

// sectionHeader parses after '[': "section]", "section.sub]" (old style,
// lowercased) or `section "sub"]` (get_base_var/get_extended_base_var).
func (p *configParser) sectionHeader() ([]byte, error) {
	var name []byte
	for {
		c := p.next()
		switch {
		case p.eof:
			return nil, p.errorf("unterminated section header")
		case c == ']':
			if len(name) == 0 {
				return nil, p.errorf("empty section name")
			}
			return name, nil
		case isConfigSpace(c):
			return p.extendedHeader(name, c)
		case !isKeyChar(c) && c != '.':
			return nil, p.errorf("bad section name character %q", c)
		}
		name = append(name, lowerASCII(c))
	}
}

func (p *configParser) extendedHeader(name []byte, c byte) ([]byte, error) {
	for isConfigSpace(c) {
		if c == '\n' {
			return nil, p.errorf("incomplete section header")
		}
		c = p.next()
	}
	if c != '"' {
		return nil, p.errorf(`want '"' in section header`)
	}
	name = append(name, '.')
	for {
		c := p.next()
		if c == '\n' {
			return nil, p.errorf("incomplete section header")
		}
		if c == '"' {
			break
		}
		if c == '\\' {
			if c = p.next(); c == '\n' {
				return nil, p.errorf("incomplete section header")
			}
		}
		name = append(name, c)
	}
	if p.next() != ']' {
		return nil, p.errorf("want ']' after subsection")
	}
	return name, nil
}

// variable parses "key [= value]" starting at its first character c
// (get_value).
func (p *configParser) variable(base []byte, c byte, fn func(string, []byte, bool)) error {
	name := append(bytes.Clone(base), lowerASCII(c))
	for {
		c = p.next()
		if p.eof || !isKeyChar(c) {
			break
		}
		name = append(name, lowerASCII(c))
	}
	for c == ' ' || c == '\t' {
		c = p.next()
	}
	if c == '\n' {
		fn(string(name), nil, false)
		return nil
	}
	if c != '=' {
		return p.errorf("want '=' after key")
	}
	v, err := p.value()
	if err != nil {
		return err
	}
	fn(string(name), v, true)
	return nil
}

// value parses a value up to its end of line: quotes, escapes,
// continuation lines, comments and trailing space (parse_value).
func (p *configParser) value() ([]byte, error) {
	var v []byte
	quote, comment := false, false
	trim := 0 // length to cut back to if only space follows
	for {
		c := p.next()
		if c == '\n' {
			if quote {
				return nil, p.errorf("unterminated quote")
			}
			if trim > 0 {
				v = v[:trim]
			}
			return v, nil
		}
		if comment {
			continue
		}
		if isConfigSpace(c) && !quote {
			if trim == 0 {
				trim = len(v)
			}
			if len(v) > 0 {
				v = append(v, c)
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		trim = 0
		switch c {
		case '\\':
			switch c = p.next(); c {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return nil, p.errorf("bad escape %q", c)
			}
			v = append(v, c)
		case '"':
			quote = !quote
		default:
			v = append(v, c)
		}
	}
}
