package sshgit

import (
	"context"
	"io"
	"net"
	"strings"

	"github.com/gliderlabs/ssh"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/transport/wire/clientlimit"
)

// Extra serves SSH commands beside git's own (Config.Extra): Git LFS's
// git-lfs-authenticate and git-lfs-transfer (transport/product/lfs).
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
	// In is the client's input and Out goes back to the client, both
	// cut off when the client falls behind the minimum rate.
	In  io.Reader
	Out io.Writer
	// LocalAddr is the address the client connected to.
	LocalAddr net.Addr
	// Op names the command in metrics and logs; the Extra may set it.
	Op *string
}

// serveExtra runs an Extra's command as a session of the node, with the
// same identity rules and the same minimum rate both ways as git's
// commands.
func (s *Server) serveExtra(ctx context.Context, sess ssh.Session, raw string, op *string) error {
	verb, _, _ := strings.Cut(raw, " ")
	*op = verb
	id, err := s.identity(sess)
	if err != nil {
		return err
	}
	ctx, end, err := s.gate.Begin(ctx, actors.KindSSH)
	defer end()
	if err != nil {
		return err
	}
	cmd := Command{Line: raw, Identity: id, In: sess, Out: sess, LocalAddr: sess.LocalAddr(), Op: op}
	if s.rate.Grace > 0 {
		in, stop := pipeInput(sess)
		defer stop()
		out := newKillWriter(sess, func() { closeConn(sess) })
		defer out.stop()
		cmd.In, cmd.Out = clientlimit.NewReader(in, s.rate), clientlimit.NewWriter(out, s.rate)
	}
	return s.extra.ServeSSH(ctx, cmd)
}
