package sshgit

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/gliderlabs/ssh"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/transport/gitserve"
)

// Extra serves SSH commands beside git's own (Config.Extra): Git LFS's
// git-lfs-authenticate and git-lfs-transfer (transport/lfs).
type Extra interface {
	// Serves reports whether verb (the command's first word) is one of
	// its commands.
	Serves(verb string) bool
	// ServeSSH runs one command. Its error is reported as a git
	// session's is (ERROR: on stderr, exit status 1, a log line).
	ServeSSH(ctx context.Context, cmd Command) error
}

// Command is one SSH command for an Extra.
type Command struct {
	// Line is the whole command line the client sent.
	Line string
	// Identity is the caller, from the key the connection authenticated
	// with (anonymous for an unknown key).
	Identity auth.Identity
	// In is the client's input, cut off when it stalls; Out goes back
	// to the client.
	In  io.Reader
	Out io.Writer
	// LocalAddr is the address the client connected to.
	LocalAddr net.Addr
	// Op names the command in metrics and logs; the Extra may set it.
	Op *string
}

// serveExtra runs an Extra's command as a session of the node, with the
// same identity rules and stall limit as git's commands.
func (s *Server) serveExtra(ctx context.Context, sess ssh.Session, raw string, op *string) (err error) {
	verb, _, _ := strings.Cut(raw, " ")
	*op = verb
	id, err := s.identity(sess)
	if err != nil {
		return err
	}
	ctx, end, err := s.gate.Begin(ctx, gitserve.KindSSH)
	defer end()
	if err != nil {
		return err
	}
	var in io.Reader = sess
	if s.stall > 0 {
		sr := newStallReader(sess, s.stall, func() { sess.Close() })
		defer sr.stop()
		in = sr
		defer func() {
			if sr.stalled.Load() {
				err = fmt.Errorf("%w: no input for %s", errStalled, s.stall)
			}
		}()
	}
	return s.extra.ServeSSH(ctx, Command{Line: raw, Identity: id, In: in, Out: sess, LocalAddr: sess.LocalAddr(), Op: op})
}
