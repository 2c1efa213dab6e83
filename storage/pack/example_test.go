package pack_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/rgit/rgit/storage/object"
	"github.com/rgit/rgit/storage/pack"
)

// tinyPack returns a version 2 pack holding one blob: the "PACK" header,
// one entry (type and size in a varint header, then the zlib-compressed
// content) and the SHA-1 trailer of everything before it.
func tinyPack(content []byte) []byte {
	var b bytes.Buffer
	b.WriteString("PACK")
	_ = binary.Write(&b, binary.BigEndian, uint32(2)) // version
	_ = binary.Write(&b, binary.BigEndian, uint32(1)) // objects
	n := len(content)
	hdr := byte(object.Blob)<<4 | byte(n&0x0f)
	for n >>= 4; n > 0; n >>= 7 {
		b.WriteByte(hdr | 0x80)
		hdr = byte(n & 0x7f)
	}
	b.WriteByte(hdr)
	z := zlib.NewWriter(&b)
	_, _ = z.Write(content)
	_ = z.Close()
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// IndexPack reads a pack as a push delivers it, writes it and its .idx to
// a directory, and names every object; OpenIndexed then reads objects back
// by id, as a clone does.
func ExampleIndexPack() {
	dir, err := os.MkdirTemp("", "pack-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ix, err := pack.IndexPack(context.Background(), bytes.NewReader(tinyPack([]byte("hi\n"))), dir, pack.IndexOptions{})
	if err != nil {
		panic(err)
	}
	for _, o := range ix.Objects {
		fmt.Println(o.Type, o.ID, o.Size)
	}

	p, err := pack.OpenIndexed(ix)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	id := object.Hash(object.Blob, []byte("hi\n")) // what `git hash-object` prints
	typ, data, err := p.ReadObject(id)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %q\n", typ, data)
	// Output:
	// blob 45b983be36b73c0788dc9cbcb76cbb80fc7bb057 3
	// blob "hi\n"
}
