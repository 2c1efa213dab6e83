package gitproto

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rgit/rgit/transport/wire/pktline"
)

// conn is one session's framed input and buffered output. Output is
// flushed before every read that may wait for the client (full duplex)
// and at the end of the session.
type conn struct {
	in  *bufio.Reader
	pr  *pktline.Reader
	out *bufio.Writer
	pw  *pktline.Writer
	mux *pktline.Muxer // non-nil once side-band framing of the response began

	// input and reqTimeout bound the arrival of a whole request
	// (beginRequest); reqDue is the current request's deadline, zero
	// outside one.
	input      ReadDeadliner
	reqTimeout time.Duration
	reqDue     time.Time
	// direct is pw's writer on out while held collects the output in
	// memory (hold).
	direct *pktline.Writer
	held   *bytes.Buffer
}

// bound applies the session's request deadline settings.
func (c *conn) bound(opt Options) {
	c.input, c.reqTimeout = opt.Input, opt.requestTimeout()
}

// beginRequest flushes pending output and starts the deadline of one
// whole request, to be ended by endRequest once its last line is read.
// The time the client takes to read the previous answer is the write
// side's to bound, not the request's.
func (c *conn) beginRequest() error {
	if err := c.flush(); err != nil {
		return err
	}
	if c.input == nil || c.reqTimeout <= 0 {
		return nil
	}
	c.reqDue = time.Now().Add(c.reqTimeout)
	_ = c.input.SetReadDeadline(c.reqDue)
	return nil
}

// endRequest ends the request deadline.
func (c *conn) endRequest() {
	if c.reqDue.IsZero() {
		return
	}
	c.reqDue = time.Time{}
	_ = c.input.SetReadDeadline(time.Time{})
}

// requestTimedOut is the error of a request that did not arrive whole
// within its deadline.
func (c *conn) requestTimedOut() *LimitError {
	return &LimitError{What: "request not complete in time", Limit: int64(c.reqTimeout / time.Second), Unit: "seconds", Setting: SettingRequestTimeout}
}

// hold collects the output in memory until emit: work done under a
// negotiation slot must not wait for the client to read. Pending output
// has been flushed by the read that preceded the work.
func (c *conn) hold() {
	c.held = new(bytes.Buffer)
	c.direct, c.pw = c.pw, pktline.NewWriter(c.held)
}

// discard drops what hold collected.
func (c *conn) discard() {
	if c.held != nil {
		c.pw, c.direct, c.held = c.direct, nil, nil
	}
}

// emit queues what hold collected on the connection's output.
func (c *conn) emit() error {
	if c.held == nil {
		return nil
	}
	b := c.held
	c.pw, c.direct, c.held = c.direct, nil, nil
	if _, err := c.out.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

func newConn(in io.Reader, out io.Writer) *conn {
	br := bufio.NewReaderSize(in, connBufSize)
	bw := bufio.NewWriterSize(out, connBufSize)
	return &conn{in: br, pr: pktline.NewReader(br), out: bw, pw: pktline.NewWriter(bw)}
}

const connBufSize = 64 << 10

// Pooled conn buffers, for sessions that hand neither buffer to anyone
// who may keep it past the session (upload-pack): their 128 KiB were
// most of what a cold ls-remote allocated, and so of the collector's
// work on a node opening many repositories.
var (
	connReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, connBufSize) }}
	connWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, connBufSize) }}
)

// newPooledConn is newConn with pooled buffers; release returns them.
func newPooledConn(in io.Reader, out io.Writer) *conn {
	br := connReaders.Get().(*bufio.Reader)
	br.Reset(in)
	bw := connWriters.Get().(*bufio.Writer)
	bw.Reset(out)
	return &conn{in: br, pr: pktline.NewReader(br), out: bw, pw: pktline.NewWriter(bw)}
}

// release returns a newPooledConn's buffers, dropping what they held; c
// must not be used after.
func (c *conn) release() {
	c.in.Reset(nil)
	c.out.Reset(nil)
	connReaders.Put(c.in)
	connWriters.Put(c.out)
	c.in, c.out, c.pr, c.pw, c.mux, c.direct, c.held, c.input = nil, nil, nil, nil, nil, nil, nil, nil
}

// line is one read packet with data packets as text without the optional
// trailing LF.
type line struct {
	kind pktline.Kind
	text string
}

// read flushes pending output and reads one packet. Framing errors wrap
// ErrProtocol; a clean EOF is returned as io.EOF.
func (c *conn) read() (line, error) {
	k, p, err := c.readPkt()
	if err != nil {
		return line{}, err
	}
	return line{kind: k, text: string(p)}, nil
}

// readPkt is read without the copy: p, without the trailing LF, is valid
// until the next read. Argument loops use it so a long request costs no
// allocation per line.
func (c *conn) readPkt() (pktline.Kind, []byte, error) {
	if err := c.flush(); err != nil {
		return 0, nil, err
	}
	k, p, err := c.pr.ReadPacket()
	if err != nil {
		if !c.reqDue.IsZero() && !time.Now().Before(c.reqDue) {
			return 0, nil, c.requestTimedOut()
		}
		if err == io.EOF {
			return 0, nil, io.EOF
		}
		if errors.Is(err, pktline.ErrTooLong) {
			return 0, nil, &LimitError{What: "pkt-line longer than the git protocol allows", Limit: pktline.MaxPacketLen, Unit: "bytes"}
		}
		if errors.Is(err, pktline.ErrInvalidLength) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		return 0, nil, fmt.Errorf("read request: %w", err)
	}
	return k, bytes.TrimSuffix(p, []byte("\n")), nil
}

// argBudget is what is left of a request's MaxArgBytes.
type argBudget struct{ used, limit int }

// readData reads a packet where EOF is a protocol error (the client hung up
// mid-request).
func (c *conn) readData() (line, error) {
	l, err := c.read()
	if err == io.EOF {
		return l, fmt.Errorf("%w: unexpected end of request", ErrProtocol)
	}
	return l, err
}

func (c *conn) flush() error {
	if err := c.out.Flush(); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

func (c *conn) printf(format string, args ...any) error {
	if err := c.pw.Writef(format, args...); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

func (c *conn) flushPkt() error {
	if err := c.pw.Flush(); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

func (c *conn) delimPkt() error {
	if err := c.pw.Delim(); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

// fail reports msg to the client (band 3 once side-band framing began, an
// ERR packet otherwise), flushes, and returns err. Write failures while
// reporting are ignored: the original error matters more.
func (c *conn) fail(msg string, err error) error {
	if c.mux != nil {
		_ = c.mux.Fatal(msg + "\n")
	} else {
		_ = c.pw.WriteString("ERR " + msg + "\n")
	}
	_ = c.out.Flush()
	return err
}

// protoErr builds an ErrProtocol error and reports it to the client with
// the given prefix (e.g. "upload-pack: ").
func (c *conn) protoErr(prefix, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return c.fail(prefix+msg, fmt.Errorf("%w: %s", ErrProtocol, msg))
}

// failLimit reports a limit to the client (with prefix) and returns it.
func (c *conn) failLimit(prefix string, e *LimitError) error {
	return c.fail(prefix+e.Error(), e)
}

// internalErr reports a generic failure to the client, keeping details in
// the returned error only.
func (c *conn) internalErr(prefix string, err error) error {
	return c.fail(prefix+"internal server error", err)
}

// sideband starts side-band framing on the response.
func (c *conn) sideband(mode pktline.SidebandMode) *pktline.Muxer {
	c.mux = pktline.NewMuxer(c.pw, mode)
	return c.mux
}

// failBusy reports a request refused for want of capacity (no
// negotiation slot in time, memory admission): a full-duplex client gets
// the reason as an ERR line (a stateless one gets the front end's 503
// with Retry-After, nothing having been written). Other errors are
// returned as they are.
func (c *conn) failBusy(opt Options, err error) error {
	if !errors.Is(err, ErrBusy) || opt.StatelessRPC {
		return err
	}
	msg := ErrBusy.Error()
	if be, ok := errors.AsType[*BusyError](err); ok {
		msg = be.Error()
	}
	return c.fail(msg, err)
}
