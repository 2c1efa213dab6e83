package engine

import (
	"time"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/transport/gitproto"
)

// PackURIs lets protocol v2 clones download the repository's largest
// stored pack straight from the object store (packfile-uris): the node
// sends a presigned URL of the pack and, inline, only the objects the
// pack leaves out.
type PackURIs struct {
	// Presigner signs the URLs: the store the packs live in.
	Presigner objstore.Presigner
	// TTL is how long a URL stays valid: the client must start its
	// download within it.
	TTL time.Duration
}

var _ gitproto.PackURIBackend = (*backend)(nil)

// OffersPackURIs implements gitproto.PackURIBackend.
func (b *backend) OffersPackURIs() bool { return b.e.PackURIs != nil }
