// Package object is git's object model as rgit needs it: object ids, types,
// and allocation-light parsers for commits, trees and tags.
//
// It is a leaf package (standard library only) shared by the pack layer,
// fsck, reachability and the protocol code.
package object

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
)

// IDSize is the length of a SHA-1 object id in bytes.
const IDSize = 20

// ID is a SHA-1 object id.
type ID [IDSize]byte

// ZeroID is the all-zero id git uses for "no object" in ref updates.
var ZeroID ID

// String returns the 40-character lowercase hex form.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the all-zero id.
func (id ID) IsZero() bool { return id == ZeroID }

// ParseID parses a 40-character hex object id.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*IDSize {
		return id, fmt.Errorf("object id %q: want %d hex digits", s, 2*IDSize)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("object id %q: %w", s, err)
	}
	return id, nil
}

// MustID parses s and panics on error; for tests and constants only.
func MustID(s string) ID {
	id, err := ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// Type is a git object type, numbered as in pack files.
type Type int8

// Object types. OfsDelta and RefDelta appear only inside pack files.
const (
	Invalid  Type = 0
	Commit   Type = 1
	Tree     Type = 2
	Blob     Type = 3
	Tag      Type = 4
	OfsDelta Type = 6
	RefDelta Type = 7
)

var typeNames = [...]string{Commit: "commit", Tree: "tree", Blob: "blob", Tag: "tag", OfsDelta: "ofs-delta", RefDelta: "ref-delta"}

func (t Type) String() string {
	if t > 0 && int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// ParseType maps "commit", "tree", "blob", "tag" to a Type.
func ParseType(s string) (Type, error) {
	for t := Commit; t <= Tag; t++ {
		if typeNames[t] == s {
			return t, nil
		}
	}
	return Invalid, fmt.Errorf("unknown object type %q", s)
}

// NewHasher returns a hash primed with the loose-object header
// "<type> <size>\0", so that writing the content yields the object's id.
func NewHasher(t Type, size int64) hash.Hash {
	h := sha1.New()
	h.Write(AppendHeader(nil, t, size))
	return h
}

// AppendHeader appends git's loose-object header "<type> <size>\0".
func AppendHeader(b []byte, t Type, size int64) []byte {
	b = append(b, t.String()...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, size, 10)
	return append(b, 0)
}

// Hash computes the id of an object with the given type and content.
func Hash(t Type, data []byte) ID {
	h := NewHasher(t, int64(len(data)))
	h.Write(data)
	var id ID
	h.Sum(id[:0])
	return id
}

// ErrMalformed is wrapped by every parse error in this package.
var ErrMalformed = errors.New("malformed object")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Reader reads whole objects by id. Implementations return an error wrapping
// ErrNotFound for ids they do not hold.
type Reader interface {
	ReadObject(id ID) (Type, []byte, error)
}

// ErrNotFound reports an object id that is not present.
var ErrNotFound = errors.New("object not found")

// ParseHex parses exactly 40 lowercase hex digits, as git writes ids in
// objects and protocol lines. It takes a packet's bytes as well as a
// string, so protocol loops parse without allocating.
func ParseHex[T string | []byte](s T) (ID, bool) {
	var id ID
	if len(s) != 2*IDSize {
		return id, false
	}
	for i := range IDSize {
		hi, lo := hexDigit[s[2*i]], hexDigit[s[2*i+1]]
		if hi|lo > 0xf {
			return ID{}, false
		}
		id[i] = hi<<4 | lo
	}
	return id, true
}

// hexDigit is the value of each lowercase hex digit, 0xff for any other
// byte: a table, as walks parse a commit's ids by the hundred thousand.
var hexDigit = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
	}
	return t
}()

// hexID parses exactly 40 hex digits at the start of b.
func hexID(b []byte) (ID, bool) {
	if len(b) < 2*IDSize {
		return ID{}, false
	}
	return ParseHex(b[:2*IDSize])
}

// nextLine splits b at the first '\n'.
func nextLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+1:], true
}
