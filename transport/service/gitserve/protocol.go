package gitserve

import (
	"context"
	"fmt"
	"io"

	"github.com/rgit/rgit/transport/service/admission"
	"github.com/rgit/rgit/transport/wire/gitproto"
	"github.com/rgit/rgit/transport/wire/pktline"
)

// GitProtocol is the production Protocol: rgit's own protocol implementation
// in transport/wire/gitproto.
type GitProtocol struct {
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

// UploadPack implements Protocol. A fetch is admitted once its negotiation
// has decided that a pack follows (gitproto.Options.AdmitPack), so a
// session waiting for its client holds no reservation, and an
// advertisement or ls-refs none at all.
func (e GitProtocol) UploadPack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	opt.Limits = e.Limits
	opt.AdmitPack = func() (func(), error) { return e.reserve(admission.Fetch, b) }
	return gitproto.UploadPack(ctx, b, in, out, opt)
}

// ReceivePack implements Protocol. A push is admitted before anything is
// read: its refusal is then the first line a full-duplex client sees.
func (e GitProtocol) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	opt.Limits = e.Limits
	if !opt.AdvertiseOnly {
		release, err := e.reserve(admission.Push, b)
		if err != nil {
			if !opt.StatelessRPC {
				_ = pktline.NewWriter(out).WriteString("ERR " + gitproto.ErrBusy.Error() + "\n")
			}
			return err
		}
		defer release()
	}
	return gitproto.ReceivePack(ctx, b, in, out, opt)
}

// reserve reserves memory for pack work on b. Refused, it returns an
// error wrapping gitproto.ErrBusy (a stateless client gets the front
// end's 503).
func (e GitProtocol) reserve(kind admission.Kind, b gitproto.Backend) (func(), error) {
	var objects int64
	if s, ok := b.(Sized); ok {
		objects = s.ObjectCount()
	}
	est := admission.Estimate(kind, objects)
	release, ok := e.Admission.Reserve(kind, est)
	if ok {
		return release, nil
	}
	return nil, fmt.Errorf("%w: %s of about %d MiB refused by memory admission", gitproto.ErrBusy, kind, est>>20)
}
