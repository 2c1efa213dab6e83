package object

import (
	"bytes"
	"strconv"
	"strings"
	"time"
)

// Signature is a commit's or tag's author or committer line, "Name
// <email> 1234567890 +0200", read leniently: objects in real histories
// are malformed in many ways, and they are history to show, not to refuse.
type Signature struct {
	Name, Email string
	// When is in the signature's own zone (UTC when the zone does not
	// parse); zero when the line has no time that parses.
	When time.Time
}

// ParseSignature reads v (the line after "author " or "committer "). A
// line without <email> is all name; invalid UTF-8 is replaced.
func ParseSignature(v []byte) Signature {
	lt, gt := bytes.IndexByte(v, '<'), bytes.LastIndexByte(v, '>')
	if lt < 0 || gt < lt {
		return Signature{Name: strings.ToValidUTF8(string(v), "\uFFFD")}
	}
	s := Signature{
		Name:  strings.ToValidUTF8(string(bytes.TrimSpace(v[:lt])), "\uFFFD"),
		Email: strings.ToValidUTF8(string(v[lt+1:gt]), "\uFFFD"),
	}
	f := strings.Fields(string(v[gt+1:]))
	if len(f) == 0 {
		return s
	}
	secs, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return s
	}
	loc := time.UTC
	if len(f) >= 2 && len(f[1]) == 5 {
		hh, err1 := strconv.Atoi(f[1][1:3])
		mm, err2 := strconv.Atoi(f[1][3:5])
		if err1 == nil && err2 == nil {
			off := (hh*60 + mm) * 60
			if f[1][0] == '-' {
				off = -off
			}
			loc = time.FixedZone("", off)
		}
	}
	s.When = time.Unix(secs, 0).In(loc)
	return s
}

// CommitText is a commit's author, committer and message.
type CommitText struct {
	Author, Committer Signature
	Message           string
}

// ParseCommitText reads a commit's signatures and message (invalid UTF-8
// replaced) leniently, for showing it.
func ParseCommitText(data []byte) CommitText {
	header, msg, _ := bytes.Cut(data, []byte("\n\n"))
	c := CommitText{Message: strings.ToValidUTF8(string(msg), "\uFFFD")}
	for line := range bytes.SplitSeq(header, []byte("\n")) {
		k, v, _ := bytes.Cut(line, []byte(" "))
		switch string(k) {
		case "author":
			c.Author = ParseSignature(v)
		case "committer":
			c.Committer = ParseSignature(v)
		}
	}
	return c
}
