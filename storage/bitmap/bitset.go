package bitmap

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// bitset is an uncompressed set of object positions. It grows on Set, so
// positions past a pack's count (objects outside the pack) fit too.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool {
	w := i >> 6
	return w < len(b) && b[w]&(1<<(uint(i)&63)) != 0
}

func (b *bitset) set(i int) {
	w := i >> 6
	if w >= len(*b) {
		*b = append(*b, make(bitset, w+1-len(*b))...)
	}
	(*b)[w] |= 1 << (uint(i) & 63)
}

// or adds o to b.
func (b *bitset) or(o bitset) {
	if len(o) > len(*b) {
		*b = append(*b, make(bitset, len(o)-len(*b))...)
	}
	for i, w := range o {
		(*b)[i] |= w
	}
}

// andNot removes o from b.
func (b bitset) andNot(o bitset) {
	for i := range min(len(b), len(o)) {
		b[i] &^= o[i]
	}
}

// and keeps only what is also in o.
func (b bitset) and(o bitset) {
	for i := range b {
		if i < len(o) {
			b[i] &= o[i]
		} else {
			b[i] = 0
		}
	}
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// each calls fn for every position in b, in increasing order.
func (b bitset) each(fn func(int)) {
	for i, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			fn(i<<6 + t)
			w &= w - 1
		}
	}
}

// Run-length encoding of a bitset of a known length in words: a sequence
// of marker words, each followed by its literal words. A marker holds
// the fill bit (bit 63), the number of fill words (bits 32-62) and the
// number of literal words after it (bits 0-31). All-zero and all-one
// words compress to fills; everything else is stored as is.
const (
	fillBit       = 1 << 63
	maxFillRun    = 1<<31 - 1
	maxLiteralRun = 1<<32 - 1
)

// encode appends the encoding of b to dst.
func encode(dst []byte, b bitset) []byte {
	i := 0
	for i < len(b) {
		var fill uint64
		if b[i] == ^uint64(0) {
			fill = fillBit
		}
		run := 0
		if b[i] == 0 || b[i] == ^uint64(0) {
			want := b[i]
			for i+run < len(b) && b[i+run] == want && run < maxFillRun {
				run++
			}
		}
		lit := 0
		for i+run+lit < len(b) && b[i+run+lit] != 0 && b[i+run+lit] != ^uint64(0) && lit < maxLiteralRun {
			lit++
		}
		dst = binary.BigEndian.AppendUint64(dst, fill|uint64(run)<<32|uint64(lit))
		for _, w := range b[i+run : i+run+lit] {
			dst = binary.BigEndian.AppendUint64(dst, w)
		}
		i += run + lit
	}
	return dst
}

// decode expands an encoding of exactly words words. Malformed input is an
// error, never a panic.
func decode(src []byte, words int) (bitset, error) {
	if len(src)%8 != 0 {
		return nil, fmt.Errorf("mask of %d bytes: %w", len(src), ErrCorrupt)
	}
	b := make(bitset, 0, words)
	for p := 0; p < len(src); {
		m := binary.BigEndian.Uint64(src[p:])
		p += 8
		run, lit := int(m>>32&maxFillRun), int(m&maxLiteralRun)
		if run > words-len(b) || lit > words-len(b)-run || lit > (len(src)-p)/8 {
			return nil, fmt.Errorf("mask run past %d words: %w", words, ErrCorrupt)
		}
		var fill uint64
		if m&fillBit != 0 {
			fill = ^uint64(0)
		}
		for range run {
			b = append(b, fill)
		}
		for range lit {
			b = append(b, binary.BigEndian.Uint64(src[p:]))
			p += 8
		}
	}
	if len(b) != words {
		return nil, fmt.Errorf("mask of %d words, want %d: %w", len(b), words, ErrCorrupt)
	}
	return b, nil
}
