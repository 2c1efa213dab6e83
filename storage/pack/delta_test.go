package pack

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestApplyDelta(t *testing.T) {
	base := []byte("0123456789abcdefghij")
	d := appendVarint(nil, uint64(len(base)))
	d = appendVarint(d, 14)
	d = appendCopy(d, 10, 4)        // "abcd"
	d = append(d, 3, 'X', 'Y', 'Z') // insert
	d = appendCopy(d, 0, 7)         // "0123456"
	got, err := ApplyDelta(base, d)
	if err != nil || string(got) != "abcdXYZ0123456" {
		t.Fatalf("got %q, %v", got, err)
	}
	// A copy with size bytes all zero means 0x10000.
	big := bytes.Repeat([]byte{7}, 0x10000)
	d = appendVarint(appendVarint(nil, uint64(len(big))), 0x10000)
	d = append(d, 0x80)
	if got, err := ApplyDelta(big, d); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("0x10000 copy: %v", err)
	}
}

func TestApplyDeltaRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 200; i++ {
		base := make([]byte, rng.IntN(2000))
		for j := range base {
			base[j] = byte(rng.IntN(4))
		}
		result := append(bytes.Clone(base[:rng.IntN(len(base)+1)]), make([]byte, rng.IntN(500))...)
		got, err := ApplyDelta(base, makeDelta(base, result))
		if err != nil || !bytes.Equal(got, result) {
			t.Fatalf("case %d: %v", i, err)
		}
	}
}

func TestApplyDeltaRejects(t *testing.T) {
	base := []byte("abcdef")
	hdr := func(b, r uint64) []byte { return appendVarint(appendVarint(nil, b), r) }
	cases := map[string][]byte{
		"empty":             nil,
		"truncated header":  {0x86},
		"base size":         append(hdr(5, 1), 1, 'x'),
		"result too short":  append(hdr(6, 5), 1, 'x'),
		"result too long":   append(hdr(6, 1), 2, 'x', 'y'),
		"copy out of range": append(hdr(6, 4), appendCopy(nil, 4, 4)...),
		"truncated copy":    append(hdr(6, 4), 0x91, 1),
		"truncated insert":  append(hdr(6, 4), 4, 'x'),
		"reserved":          append(hdr(6, 0), 0),
		"huge result":       hdr(6, 1<<62),
		"overflowing size":  append(hdr(6, 1), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	}
	for name, d := range cases {
		if _, err := ApplyDelta(base, d); !isErr(err, ErrCorrupt) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if _, err := applyDelta(base, append(hdr(6, 7), 7, 1, 2, 3, 4, 5, 6, 7), 6); !isErr(err, ErrTooLarge) {
		t.Errorf("limit: got %v", err)
	}
}
