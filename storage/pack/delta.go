package pack

import (
	"fmt"
	"math"
)

// Git's delta format: two little-endian base-128 varints (base size, result
// size) followed by instructions. An instruction byte with the high bit set
// is a copy from the base: bits 0-3 select which offset bytes follow, bits
// 4-6 which size bytes follow, and a size of 0 means 0x10000. Any other
// non-zero byte n inserts the next n bytes of the delta. Zero is reserved.

// DeltaSizes parses the header of a delta and returns the base size, the
// result size and the number of header bytes.
func DeltaSizes(delta []byte) (baseSize, resultSize int64, n int, err error) {
	baseSize, n1, ok := deltaVarint(delta)
	if !ok {
		return 0, 0, 0, kindf(ErrBadDelta, "truncated delta header")
	}
	resultSize, n2, ok := deltaVarint(delta[n1:])
	if !ok {
		return 0, 0, 0, kindf(ErrBadDelta, "truncated delta header")
	}
	return baseSize, resultSize, n1 + n2, nil
}

func deltaVarint(b []byte) (v int64, n int, ok bool) {
	var shift uint
	for n < len(b) {
		c := b[n]
		n++
		if shift > 56 {
			return 0, 0, false
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			return v, n, v >= 0
		}
	}
	return 0, 0, false
}

// ApplyDelta applies delta to base and returns the new object content.
// The delta is validated completely before anything is allocated, so hostile
// input cannot make it allocate more than the declared result size.
func ApplyDelta(base, delta []byte) ([]byte, error) {
	return applyDelta(base, delta, math.MaxInt64)
}

// applyDelta is ApplyDelta with a cap on the result size.
func applyDelta(base, delta []byte, maxResult int64) ([]byte, error) {
	baseSize, resultSize, n, err := DeltaSizes(delta)
	if err != nil {
		return nil, err
	}
	if baseSize != int64(len(base)) {
		return nil, kindf(ErrBadDelta, "delta base size mismatch: delta says %d, base has %d", baseSize, len(base))
	}
	if resultSize > maxResult {
		return nil, fmt.Errorf("%w: delta result of %d bytes exceeds limit %d", ErrTooLarge, resultSize, maxResult)
	}
	ops := delta[n:]
	// Pass 1 validates every instruction and sums the output so that the
	// single allocation below is exactly right.
	var total int64
	err = walkDelta(ops, len(base), func(off, size int, insert []byte) {
		if insert != nil {
			total += int64(len(insert))
		} else {
			total += int64(size)
		}
	})
	if err != nil {
		return nil, err
	}
	if total != resultSize {
		return nil, kindf(ErrBadDelta, "delta result size mismatch: header says %d, instructions produce %d", resultSize, total)
	}
	out := make([]byte, 0, resultSize)
	_ = walkDelta(ops, len(base), func(off, size int, insert []byte) {
		if insert != nil {
			out = append(out, insert...)
		} else {
			out = append(out, base[off:off+size]...)
		}
	})
	return out, nil
}

// walkDelta decodes delta instructions, checking every bound, and calls fn
// with either a copy (off, size) from the base or an insert slice.
func walkDelta(ops []byte, baseLen int, fn func(off, size int, insert []byte)) error {
	for i := 0; i < len(ops); {
		cmd := ops[i]
		i++
		switch {
		case cmd&0x80 != 0:
			var off, size uint64
			for bit := uint(0); bit < 7; bit++ {
				if cmd&(1<<bit) == 0 {
					continue
				}
				if i >= len(ops) {
					return kindf(ErrBadDelta, "truncated copy instruction")
				}
				if bit < 4 {
					off |= uint64(ops[i]) << (8 * bit)
				} else {
					size |= uint64(ops[i]) << (8 * (bit - 4))
				}
				i++
			}
			if size == 0 {
				size = 0x10000
			}
			if off+size > uint64(baseLen) {
				return kindf(ErrBadDelta, "delta copy out of bounds: offset %d size %d, base has %d", off, size, baseLen)
			}
			fn(int(off), int(size), nil)
		case cmd != 0:
			n := int(cmd)
			if i+n > len(ops) {
				return kindf(ErrBadDelta, "truncated insert instruction")
			}
			fn(0, 0, ops[i:i+n:i+n])
			i += n
		default:
			return kindf(ErrBadDelta, "reserved delta instruction 0")
		}
	}
	return nil
}
