package engine

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/service/fetchpack"
	"github.com/rgit/rgit/transport/wire/gitproto"
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
	// Metrics, if set, counts the offers and the bytes on each path.
	Metrics *PackURIMetrics
}

var _ gitproto.PackURIBackend = (*backend)(nil)

// OffersPackURIs implements gitproto.PackURIBackend.
func (b *backend) OffersPackURIs() bool { return b.e.PackURIs != nil }

// Why a clone that accepts pack URIs got none (PackURIMetrics labels).
const (
	uriOffered     = "offered"
	uriNoBitmap    = "no_bitmap"
	uriUnreachable = "unreachable"
	uriError       = "error"
)

// planPackURI answers a clone that accepts pack URIs with the
// repository's largest bitmapped pack as a URI and the rest inline. nil
// (and no error) when it cannot: the fetch is then answered as usual.
func (b *backend) planPackURI(ctx context.Context, req *gitproto.FetchRequest) (gitproto.FetchPlan, error) {
	u := b.e.PackURIs
	if u == nil || !fetchpack.URIClone(req) {
		return nil, nil
	}
	stack := b.snap.Bitmap(ctx)
	if stack == nil {
		u.Metrics.declined(uriNoBitmap)
		return nil, nil
	}
	reach, err := b.snap.Reachable(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.log().Warn("pack URI: reachable objects unknown, sending the whole pack", zap.Error(err))
		u.Metrics.declined(uriError)
		return nil, nil
	}
	p := fetchpack.URIPack(stack, reach)
	if p == nil {
		b.log().Debug("pack URI: the largest pack holds objects the refs no longer reach; not offered until maintenance rewrites it")
		u.Metrics.declined(uriUnreachable)
		return nil, nil
	}
	key, _ := repo.PackKeys(b.snap.Repo, p.Name())
	signed, err := u.Presigner.PresignGet(ctx, key, u.TTL)
	if err == nil && len(signed.Header) > 0 {
		err = fmt.Errorf("the signed request needs headers %v, which git cannot send", signed.Header)
	}
	if err != nil {
		b.log().Warn("pack URI: presign failed, sending the whole pack", zap.String("pack", p.Name()), zap.Error(err))
		u.Metrics.declined(uriError)
		return nil, nil
	}
	res, err := b.planObjects(ctx, req)
	if err != nil {
		return nil, err
	}
	u.Metrics.offered(p.Size())
	return &uriPlan{plan: plan{b: b, req: *req, res: fetchpack.Omit(res, p)}, pack: p, uri: signed.URL}, nil
}

// uriPlan is a clone answered with one stored pack by URI and the
// objects it leaves out inline.
type uriPlan struct {
	plan
	pack *pack.Pack
	uri  string
}

func (p *uriPlan) PackURIs() []gitproto.PackURI {
	return []gitproto.PackURI{{Hash: p.pack.Checksum().String(), URI: p.uri}}
}

func (p *uriPlan) WritePack(ctx context.Context, w io.Writer, progress io.Writer) error {
	st, err := fetchpack.Write(ctx, p.b.snap.Objects(), w, &p.req, p.res, progressMeters(progress))
	p.b.e.PackURIs.Metrics.inline(st.Bytes)
	return err
}

// PackURIMetrics counts clones offered a pack URI (and why others were
// not) and the pack bytes the store sent them versus the node.
type PackURIMetrics struct {
	clones *prometheus.CounterVec
	bytes  *prometheus.CounterVec
}

// NewPackURIMetrics registers rgit_pack_uri_clones_total{result} and
// rgit_pack_uri_bytes_total{from="store"|"node"}.
func NewPackURIMetrics(reg prometheus.Registerer) (*PackURIMetrics, error) {
	m := &PackURIMetrics{
		clones: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_pack_uri_clones_total",
			Help: "Clones that accepted pack URIs, by outcome: offered, or why not (no_bitmap, unreachable: the largest pack holds objects the refs no longer reach, error).",
		}, []string{"result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_pack_uri_bytes_total",
			Help: "Pack bytes of clones offered a pack URI: from=store, the packs the clients downloaded from the object store; from=node, the inline packs the node sent beside them.",
		}, []string{"from"}),
	}
	// Every series exists from the start, at zero.
	for _, r := range []string{uriOffered, uriNoBitmap, uriUnreachable, uriError} {
		m.clones.WithLabelValues(r)
	}
	m.bytes.WithLabelValues("store")
	m.bytes.WithLabelValues("node")
	for _, c := range []prometheus.Collector{m.clones, m.bytes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register pack URI metrics: %w", err)
		}
	}
	return m, nil
}

func (m *PackURIMetrics) declined(result string) {
	if m != nil {
		m.clones.WithLabelValues(result).Inc()
	}
}

func (m *PackURIMetrics) offered(packBytes int64) {
	if m != nil {
		m.clones.WithLabelValues(uriOffered).Inc()
		m.bytes.WithLabelValues("store").Add(float64(packBytes))
	}
}

func (m *PackURIMetrics) inline(n int64) {
	if m != nil {
		m.bytes.WithLabelValues("node").Add(float64(n))
	}
}
