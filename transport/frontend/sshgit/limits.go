package sshgit

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gliderlabs/ssh"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/transport/service/gitserve"
)

// orDefault maps a configured duration to its effective value: 0 is d,
// negative is none (0).
func orDefault(v, d time.Duration) time.Duration {
	switch {
	case v == 0:
		return d
	case v < 0:
		return 0
	}
	return v
}

// connState is what one connection holds: its unauthenticated unit (held
// until it authenticates with a registered key, or closes), its
// authentication deadline, and its open sessions.
type connState struct {
	release  func()
	timer    *time.Timer // nil: no authentication deadline
	authed   atomic.Bool
	anon     atomic.Bool // authenticated with an unregistered key
	sessions atomic.Int32
}

type connStateKey struct{}

// accept admits a new connection (gliderlabs' ConnCallback): within the
// per-address cap, and closed if it has not authenticated in time.
func (s *Server) accept(ctx ssh.Context, c net.Conn) net.Conn {
	release, ok := s.anon.Acquire(c.RemoteAddr().String())
	if !ok {
		msg := s.anon.Refusal()
		s.log.Info("ssh connection refused", zap.String("remote", c.RemoteAddr().String()), zap.String("reason", msg))
		// A server may send lines before its version; OpenSSH shows them
		// with -v, git says the connection was closed.
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, msg+"\r\n")
		return nil // gliderlabs closes it
	}
	st := &connState{release: release}
	if s.authDur > 0 {
		st.timer = time.AfterFunc(s.authDur, func() {
			if !st.authed.Load() {
				s.log.Info("ssh connection closed: authentication not finished in time",
					zap.String("remote", c.RemoteAddr().String()), zap.Duration("limit", s.authDur))
				c.Close()
			}
		})
	}
	ctx.SetValue(connStateKey{}, st)
	return &trackedConn{Conn: c, st: st}
}

// trackedConn gives back the connection's unit when it closes.
type trackedConn struct {
	net.Conn
	st   *connState
	once sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		if t.st.timer != nil {
			t.st.timer.Stop()
		}
		t.st.release()
	})
	return t.Conn.Close()
}

// serverConfig hears each connection's successful authentication.
func (s *Server) serverConfig(ctx ssh.Context) *gossh.ServerConfig {
	return &gossh.ServerConfig{
		AuthLogCallback: func(_ gossh.ConnMetadata, _ string, err error) {
			if err == nil {
				s.authenticated(ctx)
			}
		},
	}
}

// authenticated ends the authentication deadline and, for a registered
// key, gives the unauthenticated unit back: an anonymous connection
// keeps it until it closes.
func (s *Server) authenticated(ctx ssh.Context) {
	st, _ := ctx.Value(connStateKey{}).(*connState)
	if st == nil {
		return
	}
	st.authed.Store(true)
	if st.timer != nil {
		st.timer.Stop()
	}
	if key, _ := ctx.Value(ssh.ContextKeyPublicKey).(ssh.PublicKey); key != nil {
		if _, err := s.keys.KeyIdentity(ctx, key); err == nil {
			st.release()
			return
		}
	}
	st.anon.Store(true)
}

// sessionChannel opens a session within the connection's channel bound
// (one at a time for an anonymous connection, whose unit covers one),
// with its environment bounded.
func (s *Server) sessionChannel(srv *ssh.Server, conn *gossh.ServerConn, newChan gossh.NewChannel, ctx ssh.Context) {
	if st, _ := ctx.Value(connStateKey{}).(*connState); st != nil {
		limit, what := int32(MaxChannels), "too many sessions on one connection"
		if st.anon.Load() {
			limit, what = 1, "an unregistered key runs one session per connection"
		}
		if st.sessions.Add(1) > limit {
			st.sessions.Add(-1)
			_ = newChan.Reject(gossh.ResourceShortage, fmt.Sprintf("%s (limit %d, fixed)", what, limit))
			return
		}
		defer st.sessions.Add(-1)
	}
	ssh.DefaultSessionHandler(srv, conn, envLimited{newChan}, ctx)
}

// envLimited refuses a session's environment requests beyond MaxEnv or
// MaxEnvBytes (the client hears "not accepted" and carries on): each is
// otherwise kept for the session's life.
type envLimited struct{ gossh.NewChannel }

func (e envLimited) Accept() (gossh.Channel, <-chan *gossh.Request, error) {
	ch, reqs, err := e.NewChannel.Accept()
	if err != nil {
		return ch, reqs, err
	}
	out := make(chan *gossh.Request)
	go func() {
		defer close(out)
		n, size := 0, 0
		for r := range reqs {
			if r.Type == "env" {
				n, size = n+1, size+len(r.Payload)
				if n > MaxEnv || size > MaxEnvBytes {
					if r.WantReply {
						_ = r.Reply(false, nil)
					}
					continue
				}
			}
			out <- r
		}
	}()
	return ch, out, nil
}

// pipeInput reads r on its own goroutine into a net.Pipe, whose read
// deadline the pacing and the request deadline cut blocked reads with:
// an SSH channel has none. stop ends it; the goroutine ends with r.
func pipeInput(r io.Reader) (net.Conn, func()) {
	mine, theirs := net.Pipe()
	go func() {
		_, _ = io.Copy(theirs, r)
		theirs.Close()
	}()
	return mine, func() { mine.Close() }
}

// killWriter is an SSH channel writer with a write deadline: a channel
// has none, so at the deadline it closes the whole connection, which
// fails the blocked write.
type killWriter struct {
	w     io.Writer
	timer *time.Timer
	fired atomic.Bool
}

func newKillWriter(w io.Writer, kill func()) *killWriter {
	k := &killWriter{w: w}
	k.timer = time.AfterFunc(time.Hour, func() {
		k.fired.Store(true)
		kill()
	})
	k.timer.Stop()
	return k
}

func (k *killWriter) SetWriteDeadline(t time.Time) error {
	k.timer.Stop()
	if !t.IsZero() {
		k.timer.Reset(time.Until(t))
	}
	return nil
}

func (k *killWriter) Write(p []byte) (int, error) {
	n, err := k.w.Write(p)
	if k.fired.Load() {
		return n, fmt.Errorf("ssh channel write: %w", os.ErrDeadlineExceeded)
	}
	return n, err
}

func (k *killWriter) stop() { k.timer.Stop() }

// closeConn closes the session's whole connection: the one way to
// unblock a write the client does not read.
func closeConn(sess ssh.Session) {
	if c, ok := sess.Context().Value(ssh.ContextKeyConn).(gossh.Conn); ok {
		c.Close()
		return
	}
	sess.Close()
}

// stderr writes msg to the session's stderr within the stall time.
func (s *Server) stderr(sess ssh.Session, msg string) {
	w := newKillWriter(sess.Stderr(), func() { closeConn(sess) })
	defer w.stop()
	if s.rate.Grace > 0 {
		_ = w.SetWriteDeadline(time.Now().Add(s.rate.Grace))
	}
	_, _ = io.WriteString(w, msg)
}

// greet answers a shell request (`ssh git@host`) with who the key signed
// in as, and exit status 1: there is no shell.
func (s *Server) greet(sess ssh.Session) {
	id, err := s.identity(sess)
	eol := "\n"
	if _, _, pty := sess.Pty(); pty {
		eol = "\r\n" // the client's terminal is raw
	}
	s.stderr(sess, greeting(id, err)+eol)
	_ = sess.Exit(1)
}

// greeting is the answer to a shell request.
func greeting(id auth.Identity, err error) string {
	const noShell = "rgit does not provide shell access."
	switch {
	case err != nil:
		return "ERROR: " + gitserve.Unavailable.Message()
	case id.DeployKey != "" && len(id.Repos) == 1:
		return fmt.Sprintf("Hi %s! You've successfully authenticated with a deploy key, but %s", id.Repos[0], noShell)
	case id.Owner != "":
		return fmt.Sprintf("Hi %s! You've successfully authenticated, but %s", id.Owner, noShell)
	}
	return "Hi there! You've successfully authenticated, but this key is not registered, so it can only read public repositories; " + noShell
}
