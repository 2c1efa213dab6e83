package engine

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/names"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/pack"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/service/fetchpack"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// PackURIs lets protocol v2 fetches download stored packs straight from
// the object store (packfile-uris): the node sends presigned URLs of the
// packs that pay (fetchpack.ChooseURIPacks) and, inline, only the objects
// those packs leave out.
type PackURIs struct {
	// Presigner signs the URLs: the store the packs live in.
	Presigner objstore.Presigner
	// TTL is how long a URL stays valid: the client must start its
	// download within it.
	TTL time.Duration
	// MinBytes is the least a pack must save the node to be sent by URI
	// (fetchpack.URICandidate.Pays); a full clone's base pack is exempt.
	MinBytes int64
	// Base, if set, replaces the scheme, host and port of every URL
	// (RebaseURL): a CDN or proxy in front of the store.
	Base string
	// Metrics, if set, counts the offers and the bytes on each path.
	Metrics *PackURIMetrics
}

var _ gitproto.PackURIBackend = (*backend)(nil)

// OffersPackURIs implements gitproto.PackURIBackend.
func (b *backend) OffersPackURIs() bool { return b.e.PackURIs != nil }

// Why a fetch that accepts pack URIs got none (PackURIMetrics labels),
// besides fetchpack.URINotWorth and fetchpack.URIUnreachable.
const (
	uriOffered  = "offered"
	uriNoBitmap = "no_bitmap"
	uriError    = "error"
)

// planPackURI answers a fetch that accepts pack URIs with the stored
// packs that pay as URIs and the rest inline. With no URI to offer it
// returns the plain plan of the objects it computed, or nil (and no
// error): the fetch is then answered as usual.
func (b *backend) planPackURI(ctx context.Context, req *gitproto.FetchRequest) (gitproto.FetchPlan, error) {
	u := b.e.PackURIs
	if u == nil || !fetchpack.URIFetch(req) {
		return nil, nil
	}
	stack := b.snap.Bitmap(ctx)
	if stack == nil {
		u.Metrics.declined(uriNoBitmap)
		return nil, nil
	}
	res, err := b.planObjects(ctx, req)
	if err != nil {
		return nil, err
	}
	// Declined, the objects computed answer, except for a clone the
	// clone-pack cache may answer: it walks again only on a miss.
	var usual gitproto.FetchPlan = &plan{b: b, req: *req, res: res}
	if b.e.ClonePacks != nil && fetchpack.Cacheable(req) {
		usual = nil
	}
	packs, cands, err := fetchpack.URICandidates(b.snap.Objects(), stack, res, fetchpack.Cacheable(req), u.MinBytes)
	if err != nil {
		b.log().Warn("pack URI: candidates unknown, sending the whole pack", zap.Error(err))
		u.Metrics.declined(uriError)
		return usual, nil
	}
	if slices.ContainsFunc(cands, func(c fetchpack.URICandidate) bool { return c.Need > 0 }) {
		reach, err := b.snap.Reachable(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			b.log().Warn("pack URI: reachable objects unknown, sending the whole pack", zap.Error(err))
			u.Metrics.declined(uriError)
			return usual, nil
		}
		for i := range cands {
			cands[i].Reachable = cands[i].Need > 0 && reach.HoldsAll(packs[i])
		}
	}
	chosen, why := fetchpack.ChooseURIPacks(cands, u.MinBytes)
	if len(chosen) == 0 {
		if why == fetchpack.URIUnreachable {
			b.log().Debug("pack URI: a pack the fetch needs holds objects the refs no longer reach; not offered until maintenance rewrites it")
		}
		u.Metrics.declined(why)
		return usual, nil
	}
	p := &uriPlan{}
	var size int64
	for _, i := range chosen {
		uri, err := u.sign(ctx, b.snap.Repo, packs[i])
		if err != nil {
			b.log().Warn("pack URI: presign failed, sending the whole pack", zap.String("pack", packs[i].Name()), zap.Error(err))
			u.Metrics.declined(uriError)
			return usual, nil
		}
		p.packs = append(p.packs, packs[i])
		p.uris = append(p.uris, gitproto.PackURI{Hash: packs[i].Checksum().String(), URI: uri})
		size += packs[i].Size()
	}
	p.plan = plan{b: b, req: *req, res: fetchpack.Omit(res, p.packs)}
	u.Metrics.offered(size)
	return p, nil
}

// sign returns the URL a client downloads p of repository r from.
func (u *PackURIs) sign(ctx context.Context, r names.Repo, p *pack.Pack) (string, error) {
	key, _ := repo.PackKeys(r, p.Name())
	signed, err := u.Presigner.PresignGet(ctx, key, u.TTL)
	if err != nil {
		return "", err
	}
	if len(signed.Header) > 0 {
		return "", fmt.Errorf("the signed request needs headers %v, which git cannot send", signed.Header)
	}
	return RebaseURL(signed.URL, u.Base)
}

// RebaseURL puts signed, a presigned store URL, behind base, a CDN or
// proxy's scheme://host[:port][/prefix] (none: signed as it is). Only the
// scheme and authority are replaced: the path and query, with the
// signature and expiry, are kept byte for byte, so the URL still names one
// object for a limited time, and a proxy that forwards them to the store
// with the store's Host header (which the signature covers) passes the
// signature through.
func RebaseURL(signed, base string) (string, error) {
	if base == "" {
		return signed, nil
	}
	u, err := url.Parse(signed)
	if err != nil {
		return "", fmt.Errorf("presigned URL: %w", err)
	}
	authority := u.Scheme + "://" + u.Host
	rest, ok := strings.CutPrefix(signed, authority)
	if u.User != nil || !ok || !strings.HasPrefix(rest, "/") {
		return "", fmt.Errorf("presigned URL of %s: not scheme://host/path", authority)
	}
	return strings.TrimSuffix(base, "/") + rest, nil
}

// uriPlan is a fetch answered with stored packs by URI and the objects
// they leave out inline.
type uriPlan struct {
	plan
	packs []*pack.Pack
	uris  []gitproto.PackURI
}

func (p *uriPlan) PackURIs() []gitproto.PackURI { return p.uris }

func (p *uriPlan) WritePack(ctx context.Context, w io.Writer, progress io.Writer) error {
	st, err := fetchpack.Write(ctx, p.b.snap.Objects(), w, &p.req, p.res, progressMeters(progress))
	p.b.e.PackURIs.Metrics.inline(st.Bytes)
	return err
}

// PackURIMetrics counts fetches offered pack URIs (and why others were
// not) and the pack bytes the store sent them versus the node.
type PackURIMetrics struct {
	clones *prometheus.CounterVec
	bytes  *prometheus.CounterVec
}

// NewPackURIMetrics registers rgit_pack_uri_fetches_total{result} and
// rgit_pack_uri_bytes_total{from="store"|"node"}.
func NewPackURIMetrics(reg prometheus.Registerer) (*PackURIMetrics, error) {
	m := &PackURIMetrics{
		clones: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_pack_uri_fetches_total",
			Help: "Fetches and clones that accepted pack URIs, by outcome: offered, or why not (no_bitmap; not_worth: no stored pack is large enough and mostly needed; unreachable: the packs that would be hold objects the refs no longer reach; error).",
		}, []string{"result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rgit_pack_uri_bytes_total",
			Help: "Pack bytes of fetches offered pack URIs: from=store, the packs the clients downloaded from the object store; from=node, the inline packs the node sent beside them.",
		}, []string{"from"}),
	}
	// Every series exists from the start, at zero.
	for _, r := range []string{uriOffered, uriNoBitmap, fetchpack.URINotWorth, fetchpack.URIUnreachable, uriError} {
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
