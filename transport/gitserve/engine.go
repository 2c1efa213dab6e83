package gitserve

import (
	"context"
	"io"

	"github.com/rgit/rgit/transport/gitproto"
)

// ProtoEngine is the production Engine: rgit's own protocol implementation
// in transport/gitproto.
type ProtoEngine struct{}

// UploadPack implements Engine.
func (ProtoEngine) UploadPack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	return gitproto.UploadPack(ctx, b, in, out, opt)
}

// ReceivePack implements Engine.
func (ProtoEngine) ReceivePack(ctx context.Context, b gitproto.Backend, in io.Reader, out io.Writer, opt gitproto.Options) error {
	return gitproto.ReceivePack(ctx, b, in, out, opt)
}
