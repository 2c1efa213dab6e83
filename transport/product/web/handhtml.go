package web

import (
	"bytes"
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

// write writes s to b with its bytes escaped.
func (e *escapes) write(b *bytes.Buffer, s string) {
	last := 0
	for i := 0; i < len(s); i++ {
		if esc := e[s[i]]; esc != "" {
			b.WriteString(s[last:i])
			b.WriteString(esc)
			last = i + 1
		}
	}
	b.WriteString(s[last:])
}

// writeText writes s as html/template writes a string in text or a quoted
// attribute.
func writeText(b *bytes.Buffer, s string) { templateEscapes.write(b, s) }

// writeURLAttr writes s as html/template writes a string in a quoted URL
// attribute (href): a scheme other than http, https or mailto becomes
// "#ZgotmplZ" (urlFilter); a byte outside URL syntax, or a "%" not
// starting an escape, is percent-encoded (urlNormalizer); "&" and "+",
// the only bytes left that a quoted attribute escapes, are escaped
// (attrEscaper).
func writeURLAttr(b *bytes.Buffer, s string) {
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
		b.WriteString(s[last:i])
		if esc != "" {
			b.WriteString(esc)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
		last = i + 1
	}
	b.WriteString(s[last:])
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// pickerHTML is the picker's list items, as layout.html's range wrote
// them.
func pickerHTML(picks []pick) template.HTML {
	if len(picks) == 0 {
		return `<li class="muted">no branches or tags</li>`
	}
	var b bytes.Buffer
	b.Grow(len(picks) * 96)
	for _, p := range picks {
		b.WriteString(`<li`)
		if p.Current {
			b.WriteString(` class="current"`)
		}
		b.WriteString(`><a href="`)
		writeURLAttr(&b, p.Href)
		b.WriteString(`">`)
		if p.Tag {
			b.WriteString(`tag: `)
		}
		writeText(&b, p.Name)
		b.WriteString(`</a></li>`)
	}
	return template.HTML(b.String())
}

// refRowsHTML is the rows of a branches (with their divergence column)
// or tags table.
func refRowsHTML(rows []refRow, branches bool) template.HTML {
	if len(rows) == 0 {
		return `<tr><td class="muted">none</td></tr>`
	}
	var b bytes.Buffer
	b.Grow(len(rows) * 640)
	for _, r := range rows {
		b.WriteString("<tr>\n<td><a class=\"refname\" href=\"")
		writeURLAttr(&b, r.Href)
		b.WriteString(`">`)
		writeText(&b, r.Name)
		b.WriteString(`</a>`)
		if r.Default {
			b.WriteString(` <span class="badge" id="default">default</span>`)
		}
		b.WriteString("\n")
		if r.Tag != nil {
			b.WriteString(`<div class="annotation">`)
			writeText(&b, r.Tag.Message)
			b.WriteString(`</div>`)
		}
		b.WriteString("</td>\n<td>")
		if c := r.Commit; c != nil {
			b.WriteString(`<a class="subject" href="`)
			writeURLAttr(&b, c.Href)
			b.WriteString(`">`)
			writeText(&b, c.Subject())
			b.WriteString(`</a> <span class="muted">`)
			writeText(&b, c.Author.Name)
			b.WriteString(`</span>`)
		}
		b.WriteString("</td>\n<td class=\"muted\">")
		if !r.Date.IsZero() {
			writeText(&b, formatWhen(r.Date))
		}
		b.WriteString("</td>\n")
		if branches {
			b.WriteString(`<td class="divergence">`)
			if r.Ahead != "" {
				b.WriteString(`<span title="commits not in the default branch">`)
				writeText(&b, r.Ahead)
				b.WriteString(` ahead</span> · <span title="commits of the default branch not here">`)
				writeText(&b, r.Behind)
				b.WriteString(` behind</span>`)
			}
			b.WriteString(`</td>`)
		}
		b.WriteString("\n<td>")
		if c := r.Commit; c != nil {
			b.WriteString(`<a href="`)
			writeURLAttr(&b, c.Href)
			b.WriteString(`"><code>`)
			writeText(&b, shortOID(c.OID))
			b.WriteString(`</code></a>`)
		}
		b.WriteString("</td>\n</tr>")
	}
	return template.HTML(b.String())
}
