package pktline

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Side-band channels.
const (
	BandData     byte = 1 // pack data
	BandProgress byte = 2 // human-readable progress, shown on stderr
	BandError    byte = 3 // fatal error message; the stream ends after it
)

// SidebandMode selects the packet size limit of the side-band capability
// in use.
type SidebandMode int

const (
	// SideBand is the original capability: packets of at most 1000 bytes.
	SideBand SidebandMode = iota + 1
	// SideBand64k allows full-size packets.
	SideBand64k
)

// MaxBandPayload returns the largest number of bytes carried by one
// side-band packet (packet size minus header minus band byte).
func (m SidebandMode) MaxBandPayload() int {
	if m == SideBand {
		return 1000 - 4 - 1
	}
	return MaxPacketLen - 4 - 1
}

// ErrClosed is returned by a Muxer after it has sent a fatal error.
var ErrClosed = errors.New("pkt-line: side-band closed after fatal error")

// Muxer multiplexes pack data, progress and a fatal error onto one
// pkt-line Writer. It is safe for concurrent use, so a pack writer and a
// progress reporter may run on different goroutines.
type Muxer struct {
	mu     sync.Mutex
	w      *Writer
	max    int
	closed bool
}

// NewMuxer returns a Muxer writing packets to w in the given mode.
func NewMuxer(w *Writer, mode SidebandMode) *Muxer {
	return &Muxer{w: w, max: mode.MaxBandPayload()}
}

// WriteBand writes p on band, split into as many packets as needed.
func (m *Muxer) WriteBand(band byte, p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	written := 0
	for len(p) > 0 {
		n := min(len(p), m.max)
		if err := m.w.WriteBand(band, p[:n]); err != nil {
			return written, fmt.Errorf("side-band %d: %w", band, err)
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// Fatal sends msg on band 3. No further writes are accepted afterwards,
// because a client stops reading the stream at the first band-3 packet.
func (m *Muxer) Fatal(msg string) error {
	_, err := m.WriteBand(BandError, []byte(msg))
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return err
}

// Data returns an io.Writer for band 1.
func (m *Muxer) Data() io.Writer { return bandWriter{m, BandData} }

// Progress returns an io.Writer for band 2.
func (m *Muxer) Progress() io.Writer { return bandWriter{m, BandProgress} }

type bandWriter struct {
	m    *Muxer
	band byte
}

func (b bandWriter) Write(p []byte) (int, error) { return b.m.WriteBand(b.band, p) }
