package refdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/rgit/rgit/storage/format"
)

// Object layout under the database prefix P:
//
//	P/wal/{seq:020d}   one log record: a batch of committed mutations, or a
//	                   writer's fence (no mutations)
//	P/snap/{seq:020d}  the full state after applying log records 1..seq
//
// Both are created with PutIfAbsent and never rewritten; zero-padded
// decimal sequence numbers make the store's key order the log order.
const (
	walDir  = "wal/"
	snapDir = "snap/"
)

// Encoding (all integers unsigned varints unless noted):
//
//	magic "rgdb" | version byte | kind byte | payload | crc32c (4 bytes BE)
//
// The checksum covers everything before it. Log payload: writer id (16
// bytes), batch nonce, seq, mutation count, mutations. Snapshot payload:
// seq, pair count, pairs in ascending key order. A mutation is a flag byte
// (0 set, 1 delete), key length, key, and for a set value length, value.
const (
	magic       = "rgdb"
	kindLog     = 1
	kindSnap    = 2
	headerLen   = len(magic) + 2
	trailerLen  = 4
	writerIDLen = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// mutation is one effective change; CAS conditions are resolved before a
// record is written, so only outcomes are logged.
type mutation struct {
	key    string
	value  []byte
	delete bool
}

// logRecord is a decoded P/wal/ object.
type logRecord struct {
	writer [writerIDLen]byte
	nonce  uint64
	seq    uint64
	muts   []mutation
}

func seqKey(prefix, dir string, seq uint64) string {
	return fmt.Sprintf("%s%s%020d", prefix, dir, seq)
}

// parseSeqKey returns the sequence number of a key under prefix+dir.
func parseSeqKey(prefix, dir, key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, prefix+dir)
	if !ok || len(rest) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}

func appendHeader(b []byte, kind byte) []byte {
	b = append(b, magic...)
	return append(b, byte(format.RefDB.Write), kind)
}

func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTrailer(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func encodeLog(r *logRecord) []byte {
	size := headerLen + writerIDLen + 3*binary.MaxVarintLen64 + trailerLen
	for _, m := range r.muts {
		size += 1 + 2*binary.MaxVarintLen64 + len(m.key) + len(m.value)
	}
	b := appendHeader(make([]byte, 0, size), kindLog)
	b = append(b, r.writer[:]...)
	b = binary.AppendUvarint(b, r.nonce)
	b = binary.AppendUvarint(b, r.seq)
	b = binary.AppendUvarint(b, uint64(len(r.muts)))
	for _, m := range r.muts {
		if m.delete {
			b = append(b, 1)
			b = appendString(b, m.key)
			continue
		}
		b = append(b, 0)
		b = appendString(b, m.key)
		b = appendBytes(b, m.value)
	}
	return appendTrailer(b)
}

func encodeSnapshot(v *View) []byte {
	b := appendHeader(make([]byte, 0, 64+v.n*64), kindSnap)
	b = binary.AppendUvarint(b, v.seq)
	b = binary.AppendUvarint(b, uint64(v.n))
	for k, val := range v.Scan("") {
		b = appendString(b, k)
		b = appendBytes(b, val)
	}
	return appendTrailer(b)
}

// errMalformed is wrapped into ErrCorrupt with the object key by callers.
var errMalformed = errors.New("malformed")

// decoder reads the payload; the first error sticks and later reads
// return zero values, so decode functions check once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or invalid %s", errMalformed, what)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) byte1(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail(what)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// count reads an element count and rejects counts that cannot fit in the
// remaining bytes (each element takes at least min bytes), so a corrupt
// count cannot force a huge allocation.
func (d *decoder) count(what string, min int) int {
	n := d.uvarint(what)
	if d.err == nil && n > uint64(len(d.b)/min) {
		d.fail(what)
		return 0
	}
	return int(n)
}

// openRecord checks framing and checksum and returns a decoder over the payload.
func openRecord(data []byte, kind byte) (*decoder, error) {
	if len(data) < headerLen+trailerLen || string(data[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: bad magic or short object (%d bytes)", errMalformed, len(data))
	}
	if err := format.RefDB.Check(uint32(data[len(magic)])); err != nil {
		return nil, err
	}
	if k := data[len(magic)+1]; k != kind {
		return nil, fmt.Errorf("%w: object kind %d, want %d", errMalformed, k, kind)
	}
	body := data[:len(data)-trailerLen]
	want := binary.BigEndian.Uint32(data[len(data)-trailerLen:])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch", errMalformed)
	}
	return &decoder{b: body[headerLen:]}, nil
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", errMalformed, len(d.b))
	}
	return d.err
}

func decodeLog(data []byte) (*logRecord, error) {
	d, err := openRecord(data, kindLog)
	if err != nil {
		return nil, err
	}
	r := &logRecord{}
	if len(d.b) < writerIDLen {
		return nil, fmt.Errorf("%w: short writer id", errMalformed)
	}
	copy(r.writer[:], d.b)
	d.b = d.b[writerIDLen:]
	r.nonce = d.uvarint("batch nonce")
	r.seq = d.uvarint("sequence")
	n := d.count("mutation count", 2)
	r.muts = make([]mutation, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		flag := d.byte1("mutation flag")
		m := mutation{key: string(d.bytes("key"))}
		switch flag {
		case 0:
			m.value = d.bytes("value")
		case 1:
			m.delete = true
		default:
			d.fail("mutation flag")
		}
		r.muts = append(r.muts, m)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return r, nil
}

func decodeSnapshot(data []byte) (*View, error) {
	d, err := openRecord(data, kindSnap)
	if err != nil {
		return nil, err
	}
	seq := d.uvarint("sequence")
	n := d.count("pair count", 2)
	b := newBuilder()
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		k := string(d.bytes("key"))
		v := d.bytes("value")
		if d.err == nil && i > 0 && k <= prev {
			d.err = fmt.Errorf("%w: keys out of order at %q", errMalformed, k)
		}
		prev = k
		b.add(k, v)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return b.view(seq), nil
}

// corrupt wraps a decoding failure so it names the object. A version
// this build does not read is refused as such (format.ErrUnsupported),
// not reported as damage.
func corrupt(key string, err error) error {
	if errors.Is(err, format.ErrUnsupported) {
		return fmt.Errorf("refdb: %s: %w", key, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrCorrupt, key, err)
}
