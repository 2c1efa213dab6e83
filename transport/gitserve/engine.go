package gitserve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/rgit/rgit/transport/admission"
	"github.com/rgit/rgit/transport/gitproto"
	"github.com/rgit/rgit/transport/pktline"
)

// ProtoEngine is the production Engine: rgit's own protocol implementation
// in transport/gitproto.
type ProtoEngine struct {
	// Limits apply to every session: they are the node's configuration,
	// not the front end's (whose Options leave them zero).
	Limits gitproto.Limits
	// Admission, if set, admits pack work against the node's memory
	// budget; it is shared by every front end, like Limits.
	Admission *admission.Controller
}

// Sized is implemented by backends that know how many objects their
// repository holds, which scales the admission estimate.
type Sized interface {
	ObjectCount() int64
}

// UploadPack implements Engine.
func (e ProtoEngine) UploadPack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	opt.Limits = e.Limits
	in, pack := packWork(in, opt)
	if pack {
		release, err := e.admit(admission.Fetch, b, out, opt)
		if err != nil {
			return err
		}
		defer release()
	}
	return gitproto.UploadPack(ctx, b, in, out, opt)
}

// ReceivePack implements Engine.
func (e ProtoEngine) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	opt.Limits = e.Limits
	if !opt.AdvertiseOnly {
		release, err := e.admit(admission.Push, b, out, opt)
		if err != nil {
			return err
		}
		defer release()
	}
	return gitproto.ReceivePack(ctx, b, in, out, opt)
}

var lsRefs = []byte("command=ls-refs")

// packWork reports whether an upload-pack call may send a pack. An
// advertisement does not, and neither does a stateless v2 request for
// another command than fetch (ls-refs is most of them): the request's
// first pkt-line is peeked, and the returned reader still yields it. A
// full-duplex session (SSH) is admitted as a whole, before anything is
// read: its refusal is then the first line the client sees.
func packWork(in io.Reader, opt gitproto.Options) (io.Reader, bool) {
	if opt.AdvertiseOnly {
		return in, false
	}
	if !opt.StatelessRPC || opt.Protocol != 2 || in == nil {
		return in, true
	}
	br := bufio.NewReader(in)
	head, _ := br.Peek(4 + len(lsRefs))
	return br, !(len(head) == 4+len(lsRefs) && bytes.Equal(head[4:], lsRefs))
}

// admit reserves memory for pack work on b. Refused, it returns an error
// wrapping gitproto.ErrBusy; a full-duplex client has been sent "ERR
// server busy" first (a stateless one gets the front end's 503).
func (e ProtoEngine) admit(kind admission.Kind, b gitproto.Backend, out io.Writer, opt gitproto.Options) (func(), error) {
	var objects int64
	if s, ok := b.(Sized); ok {
		objects = s.ObjectCount()
	}
	est := admission.Estimate(kind, objects)
	release, ok := e.Admission.Reserve(kind, est)
	if ok {
		return release, nil
	}
	err := fmt.Errorf("%w: %s of about %d MiB refused by memory admission", gitproto.ErrBusy, kind, est>>20)
	if !opt.StatelessRPC {
		_ = pktline.NewWriter(out).WriteString("ERR " + gitproto.ErrBusy.Error() + "\n")
	}
	return nil, err
}
