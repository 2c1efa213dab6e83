// Package pktline implements git's pkt-line framing (gitprotocol-common),
// the side-band multiplexer used to carry pack data, progress and fatal
// errors over one pkt-line stream, and a git-style progress meter.
//
// It is a leaf package: standard library only. The protocol state machines
// that use it live in transport/wire/gitproto.
package pktline

import (
	"errors"
	"fmt"
	"io"
)

const (
	// MaxPacketLen is the largest value of a pkt-line length field, which
	// counts the 4-byte header itself.
	MaxPacketLen = 65520
	// MaxPayload is the largest payload of one data packet.
	MaxPayload = MaxPacketLen - 4
)

// Kind tells data packets apart from the special zero-length packets.
type Kind uint8

// Packet kinds. Flush is "0000", Delim "0001" (protocol v2 section
// separator) and ResponseEnd "0002" (v2 stateless-RPC end of response).
const (
	Data Kind = iota
	Flush
	Delim
	ResponseEnd
)

func (k Kind) String() string {
	switch k {
	case Data:
		return "data"
	case Flush:
		return "flush"
	case Delim:
		return "delim"
	case ResponseEnd:
		return "response-end"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

var (
	// ErrInvalidLength is wrapped by every error about a malformed length
	// header: non-hex digits, the reserved values 0003/0004, or a length
	// beyond MaxPacketLen.
	ErrInvalidLength = errors.New("pkt-line: invalid length")
	// ErrTooLong is also wrapped when the length field is over
	// MaxPacketLen, so that servers can name the protocol's limit.
	ErrTooLong = errors.New("pkt-line: longer than the protocol allows")
	// ErrTooLarge is returned by Writer for payloads over MaxPayload.
	ErrTooLarge = errors.New("pkt-line: payload too large")
	// ErrEmpty is returned by Writer for an empty data payload, which would
	// encode as the reserved "0004".
	ErrEmpty = errors.New("pkt-line: empty data packet")
)

// Reader reads pkt-lines. It never reads past the end of the current
// packet, so the caller may switch to reading raw bytes (a pack after
// receive-pack commands) from the same underlying reader; wrap that reader
// in a bufio.Reader once and hand the same one to both.
type Reader struct {
	r   io.Reader
	hdr [4]byte
	buf []byte
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// ReadPacket reads one packet. For Data packets the payload is returned; it
// aliases an internal buffer that the next ReadPacket call overwrites. At a
// clean end of stream (no byte of a new header read) it returns io.EOF; a
// stream cut inside a packet gives io.ErrUnexpectedEOF.
func (r *Reader) ReadPacket() (Kind, []byte, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Data, nil, err
	}
	n, err := ParseLength(r.hdr[:])
	if err != nil {
		return Data, nil, err
	}
	switch n {
	case 0:
		return Flush, nil, nil
	case 1:
		return Delim, nil, nil
	case 2:
		return ResponseEnd, nil, nil
	}
	n -= 4
	if cap(r.buf) < n {
		r.buf = make([]byte, n, max(n, 1024))
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Data, nil, fmt.Errorf("pkt-line payload of %d bytes: %w", n, err)
	}
	return Data, r.buf, nil
}

// ParseLength decodes a 4-hex-digit length header. It accepts 0, 1, 2 and
// 5..MaxPacketLen; lowercase and uppercase hex are both accepted as git does.
func ParseLength(h []byte) (int, error) {
	if len(h) != 4 {
		return 0, fmt.Errorf("%w: header %q is not 4 bytes", ErrInvalidLength, h)
	}
	n := 0
	for _, c := range h {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, fmt.Errorf("%w: non-hex header %q", ErrInvalidLength, h)
		}
		n = n<<4 | int(d)
	}
	switch {
	case n == 3 || n == 4:
		return 0, fmt.Errorf("%w: reserved length %q", ErrInvalidLength, h)
	case n > MaxPacketLen:
		return 0, fmt.Errorf("%w: %w: %d exceeds maximum %d", ErrInvalidLength, ErrTooLong, n, MaxPacketLen)
	}
	return n, nil
}

// Writer writes pkt-lines. Each packet is handed to the underlying writer
// in a single Write call; wrap it in a bufio.Writer to batch small packets
// and flush that before waiting for the peer.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

const hexDigits = "0123456789abcdef"

func appendHeader(b []byte, n int) []byte {
	return append(b, hexDigits[n>>12&0xf], hexDigits[n>>8&0xf], hexDigits[n>>4&0xf], hexDigits[n&0xf])
}

// Write writes p as one data packet. It implements io.Writer, but unlike a
// stream it fails with ErrTooLarge instead of splitting long input.
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.writeParts(p, nil); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString writes s as one data packet.
func (w *Writer) WriteString(s string) error {
	return w.writeParts(nil, []byte(s))
}

// Writef formats a payload and writes it as one data packet.
func (w *Writer) Writef(format string, args ...any) error {
	return w.WriteString(fmt.Sprintf(format, args...))
}

// WriteBand writes one packet whose payload is the band byte followed by p.
func (w *Writer) WriteBand(band byte, p []byte) error {
	return w.writeParts([]byte{band}, p)
}

func (w *Writer) writeParts(a, b []byte) error {
	n := len(a) + len(b)
	if n == 0 {
		return ErrEmpty
	}
	if n > MaxPayload {
		return fmt.Errorf("%w: %d bytes, maximum %d", ErrTooLarge, n, MaxPayload)
	}
	w.buf = appendHeader(w.buf[:0], n+4)
	w.buf = append(w.buf, a...)
	w.buf = append(w.buf, b...)
	_, err := w.w.Write(w.buf)
	return err
}

func (w *Writer) special(s string) error {
	_, err := io.WriteString(w.w, s)
	return err
}

// Flush writes a flush packet "0000". It does not flush any buffering of
// the underlying writer.
func (w *Writer) Flush() error { return w.special("0000") }

// Delim writes a delimiter packet "0001".
func (w *Writer) Delim() error { return w.special("0001") }

// ResponseEnd writes a response-end packet "0002".
func (w *Writer) ResponseEnd() error { return w.special("0002") }
