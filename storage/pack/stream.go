package pack

import (
	"bufio"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// streamReader reads an incoming pack exactly once. Every byte handed out is
// later "synced": fed to the pack SHA-1 and the current entry's CRC32 and
// written to the temp file. Syncing happens lazily, in large chunks on refill
// and at entry boundaries, which keeps the per-byte cost to a bounds check
// in ReadByte (the zlib inflater reads byte by byte through io.ByteReader,
// which also guarantees it never consumes past the end of its stream).
type streamReader struct {
	r    io.Reader
	buf  []byte
	pos  int   // next unread byte
	end  int   // end of valid data
	done int   // buf[:done] is synced
	base int64 // pack offset of buf[0]
	max  int64 // pack size limit; 0 = none

	sha     hash.Hash
	hashing bool // false while reading the trailer
	crc     uint32
	w       *bufio.Writer
	werr    error
	rerr    error
}

func newStreamReader(r io.Reader, w io.Writer, max int64) *streamReader {
	return &streamReader{
		r:       r,
		buf:     make([]byte, 256<<10),
		max:     max,
		sha:     sha1.New(),
		hashing: true,
		w:       bufio.NewWriterSize(w, 1<<20),
	}
}

// offset is the pack offset of the next unread byte.
func (s *streamReader) offset() int64 { return s.base + int64(s.pos) }

// sync processes everything consumed so far.
func (s *streamReader) sync() {
	chunk := s.buf[s.done:s.pos]
	if len(chunk) == 0 {
		return
	}
	if s.hashing {
		s.sha.Write(chunk)
	}
	s.crc = crc32.Update(s.crc, crc32.IEEETable, chunk)
	if s.werr == nil {
		_, s.werr = s.w.Write(chunk)
	}
	s.done = s.pos
}

// written is how much of the pack is in the file: none once a write
// failed (flush reports it).
func (s *streamReader) written() int64 {
	if s.werr != nil {
		return 0
	}
	return s.base + int64(s.done) - int64(s.w.Buffered())
}

// startEntry begins CRC accumulation for a new entry.
func (s *streamReader) startEntry() {
	s.sync()
	s.crc = 0
}

// fill makes at least want bytes available past pos, or as many as the
// input has. It returns an error only when no byte at all is available.
func (s *streamReader) fill(want int) error {
	if s.end-s.pos >= want {
		return nil
	}
	s.sync()
	n := copy(s.buf, s.buf[s.pos:s.end])
	s.base += int64(s.pos)
	s.pos, s.done, s.end = 0, 0, n
	for s.end < want && s.rerr == nil {
		m, err := s.r.Read(s.buf[s.end:])
		s.end += m
		if err != nil {
			s.rerr = err
		}
		if s.max > 0 && s.base+int64(s.end) > s.max {
			s.rerr = fmt.Errorf("%w exceeds max size %d", ErrPackTooLarge, s.max)
			s.end = int(s.max - s.base)
			return s.rerr
		}
	}
	if s.end > s.pos {
		return nil
	}
	if errors.Is(s.rerr, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return s.rerr
}

// ReadByte implements io.ByteReader.
func (s *streamReader) ReadByte() (byte, error) {
	if s.pos == s.end {
		if err := s.fill(1); err != nil {
			return 0, err
		}
	}
	c := s.buf[s.pos]
	s.pos++
	return c, nil
}

// Read implements io.Reader.
func (s *streamReader) Read(p []byte) (int, error) {
	if s.pos == s.end {
		if err := s.fill(1); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.buf[s.pos:s.end])
	s.pos += n
	return n, nil
}

// readErr is the input's error, if it failed other than by ending.
func (s *streamReader) readErr() error {
	if s.rerr == nil || errors.Is(s.rerr, io.EOF) {
		return nil
	}
	return s.rerr
}

// peek returns up to n unread bytes without consuming them; a short
// result may mean the input failed (readErr).
func (s *streamReader) peek(n int) []byte {
	_ = s.fill(n)
	return s.buf[s.pos:min(s.end, s.pos+n)]
}

// flush writes out everything consumed and reports write errors.
func (s *streamReader) flush() error {
	s.sync()
	if s.werr == nil {
		s.werr = s.w.Flush()
	}
	if s.werr != nil {
		return fmt.Errorf("write pack: %w", s.werr)
	}
	return nil
}

// inputErr maps a read error to a pack error.
func inputErr(err error, what string, off int64) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return corruptf("truncated pack: %s at offset %d", what, off)
	}
	return fmt.Errorf("%s at offset %d: %w", what, off, err)
}
