package gitserve

import (
	"context"
	"io"

	"github.com/rgit/rgit/transport/gitproto"
)

// ProtoEngine is the production Engine: rgit's own protocol implementation
// in transport/gitproto.
type ProtoEngine struct {
	// Limits apply to every session: they are the node's configuration,
	// not the front end's (whose Options leave them zero).
	Limits gitproto.Limits
}

// UploadPack implements Engine.
func (e ProtoEngine) UploadPack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	opt.Limits = e.Limits
	return gitproto.UploadPack(ctx, b, in, out, opt)
}

// ReceivePack implements Engine.
func (e ProtoEngine) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	opt.Limits = e.Limits
	return gitproto.ReceivePack(ctx, b, in, out, opt)
}
