// Package attack builds what an attacker sends, for the tests and
// benchmarks that check a node refuses it cheaply: packs whose objects
// declare far more than they weigh. It imports the standard library and
// storage/object only.
package attack

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"fmt"

	"github.com/rgit/rgit/storage/object"
)

// maxCopy is the largest copy instruction of git's delta format (three
// size bytes).
const maxCopy = 1<<24 - 1

// DeltaBomb returns a pack of two objects, a blob of baseSize zero bytes
// and a REF_DELTA against it that copies the whole blob copies times, and
// the blob's id. The delta declares a result of copies×baseSize bytes in
// a few bytes per copy, and zeros deflate to almost nothing: a 16 MiB
// blob and 64 copies make a pack of about 17 KB declaring 1 GiB.
func DeltaBomb(baseSize, copies int) (pack []byte, blob object.ID) {
	zero := make([]byte, baseSize)
	blob = object.Hash(object.Blob, zero)
	delta := appendVarint(nil, uint64(baseSize))
	delta = appendVarint(delta, uint64(baseSize)*uint64(copies))
	for range copies {
		for off := 0; off < baseSize; off += maxCopy {
			delta = appendCopy(delta, off, min(maxCopy, baseSize-off))
		}
	}
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(2))
	b.Write(entryHeader(object.Blob, int64(baseSize)))
	b.Write(deflate(zero))
	b.Write(entryHeader(object.RefDelta, int64(len(delta))))
	b.Write(blob[:])
	b.Write(deflate(delta))
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes(), blob
}

// ReceivePackRequest is what a client sends receive-pack after the ref
// advertisement: the commands ("<old> <new> <ref>", the first carrying
// caps), a flush, and the pack.
func ReceivePackRequest(caps string, cmds []string, pack []byte) []byte {
	var b bytes.Buffer
	for i, c := range cmds {
		line := c + "\n"
		if i == 0 {
			line = c + "\x00" + caps + "\n"
		}
		fmt.Fprintf(&b, "%04x%s", len(line)+4, line)
	}
	b.WriteString("0000")
	b.Write(pack)
	return b.Bytes()
}

// entryHeader is a pack entry's type and inflated size.
func entryHeader(t object.Type, size int64) []byte {
	c := byte(t)<<4 | byte(size&0x0f)
	size >>= 4
	var h []byte
	for size > 0 {
		h = append(h, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	return append(h, c)
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendCopy appends a copy instruction of size bytes (at most maxCopy)
// from offset off of the base.
func appendCopy(b []byte, off, size int) []byte {
	at := len(b)
	cmd := byte(0x80)
	b = append(b, 0)
	for i := range 4 {
		if v := byte(off >> (8 * i)); v != 0 {
			cmd |= 1 << i
			b = append(b, v)
		}
	}
	for i := range 3 {
		if v := byte(size >> (8 * i)); v != 0 {
			cmd |= 1 << (4 + i)
			b = append(b, v)
		}
	}
	b[at] = cmd
	return b
}

func deflate(data []byte) []byte {
	var b bytes.Buffer
	w, _ := zlib.NewWriterLevel(&b, zlib.BestCompression)
	w.Write(data)
	w.Close()
	return b.Bytes()
}
