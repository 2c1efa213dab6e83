package pktline

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader checks that arbitrary input never panics the reader, that
// every error is a framing error or a short read, and that re-encoding the
// packets read reproduces the consumed input exactly.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"", "0000", "0001", "0002", "0003", "0004", "0005a", "000ahello\n0000",
		"ffff", "fff0", "zzzz", "00", "0009want", "0008\x01PAC0000",
		"0014command=ls-refs\n00010009peel\n0000",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		var re bytes.Buffer
		w := NewWriter(&re)
		for {
			k, p, err := r.ReadPacket()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrInvalidLength) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				break
			}
			switch k {
			case Data:
				if len(p) == 0 || len(p) > MaxPayload {
					t.Fatalf("payload length %d", len(p))
				}
				if _, err := w.Write(p); err != nil {
					t.Fatal(err)
				}
			case Flush:
				_ = w.Flush()
			case Delim:
				_ = w.Delim()
			case ResponseEnd:
				_ = w.ResponseEnd()
			}
		}
		// The input may use uppercase hex; payloads must match exactly.
		out := re.Bytes()
		for pos := 0; pos < len(out); {
			n, _ := ParseLength(out[pos : pos+4])
			size := max(n, 4)
			if pos+size > len(in) || !bytes.EqualFold(in[pos:pos+4], out[pos:pos+4]) || !bytes.Equal(in[pos+4:pos+size], out[pos+4:pos+size]) {
				t.Fatalf("re-encoding %q does not match input %q at %d", out, in, pos)
			}
			pos += size
		}
	})
}
