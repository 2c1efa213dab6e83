package refdb

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rgit/rgit/storage/format"
)

// The persistent treap against a map model: random sets and deletes, old
// views unchanged, Scan ordered and prefix-exact, snapshots round-trip.
func TestViewMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 1))
	v := emptyView
	model := map[string]string{}
	type saved struct {
		v *View
		m map[string]string
	}
	var history []saved
	for step := range 3000 {
		k := fmt.Sprintf("%c/%03d", 'a'+rng.IntN(4), rng.IntN(200))
		if rng.IntN(3) == 0 {
			v = v.with(mutation{key: k, delete: true})
			delete(model, k)
		} else {
			val := fmt.Sprint(step)
			v = v.with(mutation{key: k, value: []byte(val)})
			model[k] = val
		}
		if step%300 == 0 {
			history = append(history, saved{v, maps.Clone(model)})
		}
	}
	history = append(history, saved{v, model})
	for i, h := range history {
		if err := diffMaps(contents(h.v), h.m); err != nil {
			t.Fatalf("view %d: %v", i, err)
		}
		if h.v.Len() != len(h.m) {
			t.Fatalf("view %d: Len %d, want %d", i, h.v.Len(), len(h.m))
		}
		for _, p := range []string{"", "b/", "c/1", "zzz", "a/199"} {
			var got []string
			for k := range h.v.Scan(p) {
				got = append(got, k)
			}
			var want []string
			for k := range h.m {
				if strings.HasPrefix(k, p) {
					want = append(want, k)
				}
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("view %d Scan(%q) = %v, want %v", i, p, got, want)
			}
		}
		s, err := decodeSnapshot(encodeSnapshot(h.v))
		if err != nil {
			t.Fatal(err)
		}
		if err := diffMaps(contents(s), h.m); err != nil || s.Len() != len(h.m) {
			t.Fatalf("snapshot of view %d: %v", i, err)
		}
	}
	// Early stop.
	n := 0
	for range v.Scan("") {
		n++
		if n == 3 {
			break
		}
	}
}

func TestLogRecordRoundTripAndCorruption(t *testing.T) {
	r := &logRecord{nonce: 7, seq: 12, muts: []mutation{
		{key: "ref/a", value: []byte("x")}, {key: "gone", delete: true}, {key: "empty", value: []byte{}},
	}}
	copy(r.writer[:], "0123456789abcdef")
	data := encodeLog(r)
	got, err := decodeLog(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.writer != r.writer || got.nonce != 7 || got.seq != 12 || len(got.muts) != 3 ||
		got.muts[0].key != "ref/a" || string(got.muts[0].value) != "x" || !got.muts[1].delete || got.muts[2].delete {
		t.Fatalf("round trip: %+v", got)
	}
	// Every single-byte flip and every truncation is rejected, never
	// panics (a flip of the version byte as a version this build does
	// not read).
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x01
		if _, err := decodeLog(bad); !errors.Is(err, errMalformed) && (i != len(magic) || !errors.Is(err, format.ErrUnsupported)) {
			t.Fatalf("flip at %d accepted: %v", i, err)
		}
	}
	for n := range len(data) {
		if _, err := decodeLog(data[:n]); err == nil {
			t.Fatalf("truncation to %d accepted", n)
		}
	}
	if _, err := decodeSnapshot(data); !errors.Is(err, errMalformed) {
		t.Fatalf("log decoded as snapshot: %v", err)
	}
}

// FuzzDecode: decoding never panics, and whatever decodes encodes back to
// bytes that decode to the same record, which encode to themselves again
// (so what a writer stores is what every reader sees).
func FuzzDecode(f *testing.F) {
	f.Add(encodeLog(&logRecord{seq: 1, muts: []mutation{{key: "k", value: []byte("v")}}}))
	f.Add(encodeLog(&logRecord{writer: [writerIDLen]byte{1, 2}, nonce: 1 << 40, seq: 300,
		muts: []mutation{{key: "a", value: []byte{}}, {key: "b", delete: true}, {key: "", value: []byte("\x00\xff")}}}))
	f.Add(encodeSnapshot(emptyView.with(mutation{key: "k", value: []byte("v")})))
	f.Add(encodeSnapshot(emptyView.with(mutation{key: "a", value: []byte{}}).with(mutation{key: "b", value: []byte("x")})))
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := decodeLog(data); err == nil {
			enc := encodeLog(r)
			back, err := decodeLog(enc)
			if err != nil {
				t.Fatalf("a decoded log record does not decode after encoding: %v", err)
			}
			if err := sameLog(back, r); err != nil {
				t.Fatalf("log record round trip: %v", err)
			}
			if again := encodeLog(back); !bytes.Equal(again, enc) {
				t.Fatalf("log record encoding is not stable:\n%x\n%x", enc, again)
			}
		}
		if v, err := decodeSnapshot(data); err == nil {
			enc := encodeSnapshot(v)
			back, err := decodeSnapshot(enc)
			if err != nil {
				t.Fatalf("a decoded snapshot does not decode after encoding: %v", err)
			}
			if err := diffMaps(contents(back), contents(v)); err != nil || back.Seq() != v.Seq() || back.Len() != v.Len() {
				t.Fatalf("snapshot round trip: seq %d/%d, len %d/%d: %v", back.Seq(), v.Seq(), back.Len(), v.Len(), err)
			}
			if again := encodeSnapshot(back); !bytes.Equal(again, enc) {
				t.Fatalf("snapshot encoding is not stable:\n%x\n%x", enc, again)
			}
		}
	})
}

// sameLog reports how two log records differ (values compared as bytes:
// an empty value and a missing one are the same record).
func sameLog(got, want *logRecord) error {
	if got.writer != want.writer || got.nonce != want.nonce || got.seq != want.seq || len(got.muts) != len(want.muts) {
		return fmt.Errorf("header or count: got %x/%d/%d/%d, want %x/%d/%d/%d",
			got.writer, got.nonce, got.seq, len(got.muts), want.writer, want.nonce, want.seq, len(want.muts))
	}
	for i, m := range got.muts {
		w := want.muts[i]
		if m.key != w.key || m.delete != w.delete || !bytes.Equal(m.value, w.value) {
			return fmt.Errorf("mutation %d: got %q %q delete=%v, want %q %q delete=%v", i, m.key, m.value, m.delete, w.key, w.value, w.delete)
		}
	}
	return nil
}
