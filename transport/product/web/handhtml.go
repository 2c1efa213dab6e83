package web

import (
	"html/template"
	"strings"
)

// Hand-written HTML for what a page repeats per ref (the picker on every
// repository page, the rows of the branches and tags pages). A template
// action costs a few reflective calls (the field, the escapers), and a
// list of 18 branches took two thirds of its page's time in them; here
// each value is escaped exactly as html/template escapes it in the same
// place (TestHandHTMLAsTemplate), so the page is the same byte for byte.

// escapes maps each byte that must be escaped to its replacement.
type escapes [256]string

var (
	// templateEscapes is html/template's for a string in text or a
	// quoted attribute (htmlEscaper, attrEscaper).
	templateEscapes = escapes{0: "\uFFFD", '"': "&#34;", '&': "&amp;", '\'': "&#39;", '+': "&#43;", '<': "&lt;", '>': "&gt;"}
	// chromaEscapes is html.EscapeString's, as chroma's formatter escapes
	// code.
	chromaEscapes = escapes{'<': "&lt;", '>': "&gt;", '&': "&amp;", '\'': "&#39;", '"': "&#34;"}
)

// append appends s to b with its bytes escaped.
func (e *escapes) append(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); i++ {
		if esc := e[s[i]]; esc != "" {
			b = append(b, s[last:i]...)
			b = append(b, esc...)
			last = i + 1
		}
	}
	return append(b, s[last:]...)
}

// appendText appends s as html/template writes a string in text or a
// quoted attribute.
func appendText(b []byte, s string) []byte { return templateEscapes.append(b, s) }

// appendURLAttr appends s as html/template writes a string in a quoted URL
// attribute (href): a scheme other than http, https or mailto becomes
// "#ZgotmplZ" (urlFilter); a byte outside URL syntax, or a "%" not
// starting an escape, is percent-encoded (urlNormalizer); "&" and "+",
// the only bytes left that a quoted attribute escapes, are escaped
// (attrEscaper).
func appendURLAttr(b []byte, s string) []byte {
	if scheme, _, ok := strings.Cut(s, ":"); ok && !strings.Contains(scheme, "/") &&
		!strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") && !strings.EqualFold(scheme, "mailto") {
		s = "#ZgotmplZ"
	}
	const hex = "0123456789abcdef"
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var esc string
		switch {
		case c == '&':
			esc = "&amp;"
		case c == '+':
			esc = "&#43;"
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]),
			c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			strings.IndexByte("!#$*,/:;=?@[]-._~", c) >= 0:
			continue
		}
		b = append(b, s[last:i]...)
		if esc != "" {
			b = append(b, esc...)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
		last = i + 1
	}
	return append(b, s[last:]...)
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// pickerHTML is the picker's list items, as layout.html's range wrote
// them.
func pickerHTML(picks []pick) template.HTML {
	if len(picks) == 0 {
		return `<li class="muted">no branches or tags</li>`
	}
	b := make([]byte, 0, len(picks)*96)
	for _, p := range picks {
		b = append(b, `<li`...)
		if p.Current {
			b = append(b, ` class="current"`...)
		}
		b = append(b, `><a href="`...)
		b = appendURLAttr(b, p.Href)
		b = append(b, `">`...)
		if p.Tag {
			b = append(b, `tag: `...)
		}
		b = appendText(b, p.Name)
		b = append(b, `</a></li>`...)
	}
	return template.HTML(b)
}

// refRowsHTML is the rows of a branches (with their divergence column)
// or tags table.
func refRowsHTML(rows []refRow, branches bool) template.HTML {
	if len(rows) == 0 {
		return `<tr><td class="muted">none</td></tr>`
	}
	b := make([]byte, 0, len(rows)*640)
	for _, r := range rows {
		b = append(b, "<tr>\n<td><a class=\"refname\" href=\""...)
		b = appendURLAttr(b, r.Href)
		b = append(b, `">`...)
		b = appendText(b, r.Name)
		b = append(b, `</a>`...)
		if r.Default {
			b = append(b, ` <span class="badge" id="default">default</span>`...)
		}
		b = append(b, "\n"...)
		if r.Tag != nil {
			b = append(b, `<div class="annotation">`...)
			b = appendText(b, r.Tag.Message)
			b = append(b, `</div>`...)
		}
		b = append(b, "</td>\n<td>"...)
		if c := r.Commit; c != nil {
			b = append(b, `<a class="subject" href="`...)
			b = appendURLAttr(b, c.Href)
			b = append(b, `">`...)
			b = appendText(b, c.Subject())
			b = append(b, `</a> <span class="muted">`...)
			b = appendText(b, c.Author.Name)
			b = append(b, `</span>`...)
		}
		b = append(b, "</td>\n<td class=\"muted\">"...)
		if !r.Date.IsZero() {
			b = appendText(b, formatWhen(r.Date))
		}
		b = append(b, "</td>\n"...)
		if branches {
			b = append(b, `<td class="divergence">`...)
			if r.Ahead != "" {
				b = append(b, `<span title="commits not in the default branch">`...)
				b = appendText(b, r.Ahead)
				b = append(b, ` ahead</span> · <span title="commits of the default branch not here">`...)
				b = appendText(b, r.Behind)
				b = append(b, ` behind</span>`...)
			}
			b = append(b, `</td>`...)
		}
		b = append(b, "\n<td>"...)
		if c := r.Commit; c != nil {
			b = append(b, `<a href="`...)
			b = appendURLAttr(b, c.Href)
			b = append(b, `"><code>`...)
			b = appendText(b, shortOID(c.OID))
			b = append(b, `</code></a>`...)
		}
		b = append(b, "</td>\n</tr>"...)
	}
	return template.HTML(b)
}
