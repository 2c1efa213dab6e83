package node

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	gossh "golang.org/x/crypto/ssh"

	"github.com/rgit/rgit/actors"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/clonecache"
	"github.com/rgit/rgit/storage/fsck"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/guard"
	"github.com/rgit/rgit/storage/objstore/storeurl"
	"github.com/rgit/rgit/storage/outbox"
	"github.com/rgit/rgit/storage/packcache"
	"github.com/rgit/rgit/storage/refdb"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/frontend/httpgit"
	"github.com/rgit/rgit/transport/frontend/peer"
	"github.com/rgit/rgit/transport/frontend/sshgit"
	"github.com/rgit/rgit/transport/node/config"
	"github.com/rgit/rgit/transport/node/version"
	"github.com/rgit/rgit/transport/product/admin"
	"github.com/rgit/rgit/transport/product/api"
	"github.com/rgit/rgit/transport/product/hooks"
	"github.com/rgit/rgit/transport/product/lfs"
	"github.com/rgit/rgit/transport/product/web"
	"github.com/rgit/rgit/transport/service/admission"
	"github.com/rgit/rgit/transport/service/engine"
	"github.com/rgit/rgit/transport/service/gitserve"
	"github.com/rgit/rgit/transport/wire/clientlimit"
	"github.com/rgit/rgit/transport/wire/gitproto"
)

// gcMinAge is how long garbage collection keeps an unreferenced pack: far
// longer than any push takes between staging its pack and listing it.
const gcMinAge = time.Hour

// Server is one running node.
type Server struct {
	cfg *config.Config
	// bitmaps are the background bitmap builds of first pushes, stopped
	// before the node so nothing writes to the store after Shutdown.
	bitmaps *repo.BitmapBuilds
	log     *zap.Logger
	store   objstore.Store
	// guard is store as requests see it: operation deadlines, health,
	// fail-fast while the store is down.
	guard *guard.Store
	cache *packcache.Cache
	node  *actors.Node

	httpSrv, adminSrv, peerSrv *http.Server
	apiCache                   *api.Cache // nil: RGIT_REDIS_URL unset
	sshSrv                     *sshgit.Server
	cluster                    *clusterSetup // nil: single node
	metricsSrv                 *http.Server  // nil: RGIT_METRICS_ADDR unset
	// Bound addresses (useful when the configuration asks for port 0).
	// PeerHTTPAddr is empty on a single node (no peer HTTP listener).
	// MetricsAddr is where /metrics is served: RGIT_METRICS_ADDR's own
	// listener, else the peer HTTP port (cluster) or the admin port.
	HTTPAddr, SSHAddr, AdminAddr, PeerHTTPAddr, MetricsAddr string
	// PeerSecret authenticates admin commands.
	PeerSecret string

	// The traffic state's facts (traffic): draining; started once every
	// listener is bound, so that nothing reaches a port that is not open
	// yet; prewarmed once the start-up prewarm is done; served once the
	// node has been serving.
	draining, started, prewarmed, served atomic.Bool
	prewarm                              *prewarmer
	version, bootID                      string
	// storeFault is why the object store failed its last health probe;
	// nil while it passes.
	storeFault     atomic.Pointer[string]
	probeEvery     time.Duration
	admission      *admission.Controller // nil: derived from the memory budget
	stopBackground context.CancelFunc    // ends wiring.bg
	// stopSweep ends the webhook sweep and waits for its visit in
	// progress; nil until it runs.
	stopSweep func()
	serveErr  chan error
	// given replaces the store RGIT_STORE_URL names (WithStore).
	given      objstore.Store
	clonePacks *clonecache.Cache // nil: RGIT_CLONE_CACHE_BYTES=0
	// onRoundTrip observes the actors' mailbox round trips
	// (WithRoundTripObserver).
	onRoundTrip func(ctx context.Context)
}

// Option adjusts Start beyond the configuration (tests).
type Option func(*Server)

// WithStoreProbeInterval sets how often /healthz's object store probe runs
// (default 10 s).
func WithStoreProbeInterval(d time.Duration) Option { return func(s *Server) { s.probeEvery = d } }

// WithStore makes the node use st instead of opening RGIT_STORE_URL (still
// under RGIT_STORE_TIMEOUT_SECS): benchmarks and tests run nodes in one
// process against one shared or fault-injecting store.
func WithStore(st objstore.Store) Option { return func(s *Server) { s.given = st } }

// WithRoundTripObserver has f called with the request's context before
// each actor mailbox round trip of the node (actors.Config.OnRoundTrip):
// tests count the round trips one request crosses.
func WithRoundTripObserver(f func(ctx context.Context)) Option {
	return func(s *Server) { s.onRoundTrip = f }
}

// WithAdmission replaces the admission controller derived from the memory
// budget (tests hold its budget to see refusals).
func WithAdmission(c *admission.Controller) Option { return func(s *Server) { s.admission = c } }

// Start assembles the node in the order that keeps a failed start
// harmless: bind every port, open the store and the node's local state,
// start the actors, build the git engine and the front ends, then serve.
func Start(ctx context.Context, cfg *config.Config, log *zap.Logger, opts ...Option) (*Server, error) {
	s := &Server{cfg: cfg, log: log, serveErr: make(chan error, 5), probeEvery: 10 * time.Second, bitmaps: repo.NewBitmapBuilds()}
	for _, o := range opts {
		o(s)
	}
	// Every port is bound before anything is written (the SSH host key,
	// a generated peer secret): a port in use stops the node with nothing
	// changed.
	lns, err := bind(cfg)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			lns.close()
			s.close()
		}
	}()
	s.setAddrs(lns)
	w := &wiring{build: version.Get(), reg: prometheus.NewRegistry()}
	if w.fsckSkip, err = fsck.ParseSkipList(cfg.FsckSkip); err != nil {
		return nil, fmt.Errorf("RGIT_FSCK_SKIP: %w", err)
	}
	if err := s.openStore(ctx, w.reg); err != nil {
		return nil, err
	}
	if err := s.openLocal(ctx, w); err != nil {
		return nil, err
	}
	if err := s.startActors(ctx, w); err != nil {
		return nil, err
	}
	if err := s.buildEngine(w); err != nil {
		return nil, err
	}
	fe, err := s.buildFrontEnds(w)
	if err != nil {
		return nil, err
	}
	s.serve(lns, fe)
	go s.probeStore(w.bg)
	log.Info("rgit serving", zap.String("version", s.version), zap.String("http", s.HTTPAddr), zap.String("ssh", s.SSHAddr),
		zap.String("admin", s.AdminAddr), zap.String("peer_http", s.PeerHTTPAddr), zap.String("metrics", s.MetricsAddr), zap.String("self", cfg.Self), zap.Bool("peer_tls", cfg.PeerTLS != nil),
		zap.String("store", cfg.StoreURL), zap.String("cache", cfg.CacheDir))
	ok = true
	s.started.Store(true)
	go s.join(w.bg)
	return s, nil
}

// wiring is what one step of Start hands the next.
type wiring struct {
	build    version.Info
	reg      *prometheus.Registry
	fsckSkip map[string]bool
	// bg ends the node's background work (store probe, joining, prewarm,
	// memory trimming).
	bg     context.Context
	limits admission.Limits
	deps   repo.Deps
	creds  *auth.Store
	purger actors.CachePurger // nil unless there is a cache to purge
	admit  *admission.Controller
	hooks  *hooks.Service // webhook deliveries, shared by the actors and admin

	eng   *engine.NodeResolver
	proto gitserve.GitProtocol
	gate  *gitserve.Gate // the one gate of the node's own sessions
	pm    *gitserve.PromMetrics
	// What the front ends forward with, counted; nil on a single node.
	httpFwd gitserve.Forwarder
	sessFwd gitserve.SessionForwarder

	// Git LFS: the public port's and the peer HTTP port's endpoints, and
	// the read API's content of pointers.
	lfsPublic, lfsPeer *lfs.Server
	lfsContent         *lfs.Content
	// anon is the per-address budget of requests without credentials
	// that the public front ends share (RGIT_MAX_ANON_PER_ADDR).
	anon *clientlimit.PerAddr
}

// openStore opens the store RGIT_STORE_URL names (or the one WithStore
// gave) and verifies it: opening contacts nothing, and a missing bucket
// or a wrong key must stop the node here, not surface at the first push.
func (s *Server) openStore(ctx context.Context, reg prometheus.Registerer) error {
	var backend objstore.Store
	if s.given != nil {
		backend = objstore.WithTimeout(s.given, s.cfg.StoreTimeout)
	} else {
		st, err := storeurl.Open(ctx, s.cfg.StoreURL, storeurl.Options{Timeout: s.cfg.StoreTimeout, Logger: s.log})
		if err != nil {
			return fmt.Errorf("RGIT_STORE_URL: %w", err)
		}
		backend = st
	}
	s.guard = guard.New(backend, guard.Options{OpTimeout: s.cfg.StoreOpTimeout, OpTimeoutVar: "RGIT_STORE_OP_TIMEOUT_MS",
		Observer: newStoreMetrics(reg), Log: s.log})
	s.store = s.guard
	storeStateMetric(reg, s.guard)
	if err := s.checkStore(ctx); err != nil {
		return fmt.Errorf("RGIT_STORE_URL: %w", err)
	}
	return nil
}

// openLocal opens what the node keeps besides the store: its metrics
// registry and memory budget, the pack cache, the peer secret, the
// credentials and the read API's cache.
func (s *Server) openLocal(ctx context.Context, w *wiring) error {
	cfg, log := s.cfg, s.log
	s.version, s.bootID = w.build.String(), rand.Text()
	w.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoMetric(w.build))
	w.limits = memoryLimits(cfg.MemoryLimit, log)
	var err error
	s.cache, err = packcache.Open(cfg.CacheDir, s.store, log, packcache.WithMetrics(newCacheMetrics(w.reg)),
		packcache.WithMaxOpen(cmp.Or(cfg.MaxOpenPacks, w.limits.OpenPacks)))
	if err != nil {
		return fmt.Errorf("RGIT_CACHE_DIR: %w", err)
	}
	cache := s.cache
	w.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rgit_pack_files_open", Help: "Pack file descriptors the node holds open (bounded by RGIT_MAX_OPEN_PACKS)."},
		func() float64 { return float64(cache.Stats().Files) }))
	if s.PeerSecret, err = peerSecret(cfg); err != nil {
		return err
	}
	w.deps = repo.Deps{Store: s.store, Cache: s.cache, Log: log,
		RefOpts: refdb.Options{FlushInterval: cfg.FlushInterval, ObserveCommit: commitMetric(w.reg)},
		Meta:    repo.NewMetaCache(s.store, repo.MetaCacheOptions{}),
		Ahead:   repo.NewListAhead(s.store)}
	w.creds = auth.NewStore(s.store)
	if s.apiCache, err = openAPICache(ctx, cfg, log); err != nil {
		return err
	}
	if s.apiCache != nil {
		w.purger = s.apiCache
	}
	return nil
}

// startActors starts the node's actor system: in a cluster with its
// peers and its way to the leader, on a single node (or the leader)
// after indexing repositories older than the name index; with
// admission and the idle trimmer that maintenance reports to.
func (s *Server) startActors(ctx context.Context, w *wiring) error {
	cfg, log := s.cfg, s.log
	bg, cancel := context.WithCancel(context.Background())
	w.bg, s.stopBackground = bg, cancel
	var clusterCfg *actors.ClusterConfig
	// Exported on every node (zeros on a single one): dashboards work the
	// same in either mode.
	s.prewarm = newPrewarmer(bg, w.deps, log, w.reg)
	if cfg.Cluster() {
		var err error
		if s.cluster, clusterCfg, err = newClusterSetup(cfg, s.PeerSecret, log); err != nil {
			return err
		}
		clusterCfg.Joining, clusterCfg.OnGrant = true, s.prewarm.grant
	} else {
		s.prewarmed.Store(true) // nothing moves to a single node
	}
	if s.cluster == nil || s.cluster.leader == nil {
		// One node indexes repositories older than the name index before
		// serving; access is decided from the index (docs/operations.md: names).
		n, collisions, err := repo.MigrateIndex(ctx, w.deps, w.creds)
		if err != nil {
			return fmt.Errorf("name index migration: %w", err)
		}
		if n > 0 || len(collisions) > 0 {
			log.Info("name index migrated", zap.Int("indexed", n), zap.Strings("case_collisions", collisions))
		}
	}
	w.admit = s.admission
	if w.admit == nil {
		w.admit = admission.New(w.limits, w.reg)
	}
	admit, cache := w.admit, s.cache
	trim := admission.NewTrimmer(admit)
	trim.Free = func() {
		// The delta bases are the bulk of what an idle node still holds
		// (32 MB on the big fixture after a clone); they would otherwise
		// wait out pack.DefaultBaseIdle. A base read within the last second
		// belongs to work admission does not count (a background bitmap
		// build): it stays.
		cache.DropBaseCaches(time.Second)
		debug.FreeOSMemory()
	}
	trim.Trimmed = func(before, after uint64) {
		log.Debug("idle: returned memory to the OS", zap.Uint64("retained_before", before), zap.Uint64("retained_after", after))
	}
	w.hooks = hooks.New(hooks.Config{Allow: cfg.HookAllow, Timeout: cfg.HookTimeout, Concurrency: cfg.HookConcurrency,
		Policy: outbox.Policy{Window: cfg.HookRetry, FirstRetry: cfg.HookBackoff}, Log: log, Registerer: w.reg})
	var err error
	s.node, err = actors.NewNode(actors.Config{Deps: w.deps, WarmTTL: cfg.WarmTTL, MaxWarm: cfg.MaxWarm, Cache: w.purger, Hooks: w.hooks,
		MaintenanceSlots: maintSlots(cfg.MaintSlots), MaintenanceInterval: cfg.MaintInterval, Log: log, Registerer: w.reg, Cluster: clusterCfg,
		GCInterval: cfg.GCInterval, GCMinAge: gcMinAge,
		Reserve: func(objects int64) (func(), bool) {
			return admit.Reserve(admission.Maintenance, admission.Estimate(admission.Maintenance, objects))
		},
		// Roll-ups allocate what admission does not count: once they are
		// over, the trimmer looks at once rather than at its next tick.
		MaintenanceDone: trim.Check, OnRoundTrip: s.onRoundTrip})
	if err != nil {
		return err
	}
	go trim.Run(bg)
	s.stopSweep = startSweep(bg, s.node, w.deps, cfg.HookSweep, log)
	return nil
}

// buildEngine builds the git service every front end shares: the engine
// over the actors and storage, one protocol engine (its limits, and the
// negotiation slots above all, are shared by the HTTP, SSH and peer front
// ends), the node's one gate, and in a cluster the counted forwarders.
func (s *Server) buildEngine(w *wiring) error {
	cfg := s.cfg
	eng := &engine.NodeResolver{Node: s.node, Deps: w.deps, IncomingDir: s.cache.TempDir(), Fsck: fsck.Options{Skip: w.fsckSkip, Strict: cfg.FsckStrict}, Log: s.log,
		MaxObjectSize: cfg.MaxObjectSize, MaxPackSize: cfg.MaxPackSize, MaxDeltaDepth: cfg.MaxDeltaDepth, Admission: w.admit, Bitmaps: s.bitmaps}
	if s.apiCache != nil {
		eng.RefsWatch = s.apiCache
	}
	presigner, presigns := objstore.PresignerOf(s.store)
	packURIs, err := cfg.PackURIsOn(presigns)
	if err != nil {
		return err
	}
	if packURIs {
		m, err := engine.NewPackURIMetrics(w.reg)
		if err != nil {
			return err
		}
		eng.PackURIs = &engine.PackURIs{Presigner: presigner, TTL: cfg.PackURITTL, MinBytes: cfg.PackURIMinBytes, Base: cfg.PackURIBase, Metrics: m}
	}
	if cfg.ClonePackCache > 0 {
		// Shared through the store: a cold node streams a pack another
		// node built instead of building it again.
		if eng.ClonePacks, err = clonecache.New(filepath.Join(cfg.CacheDir, "clonepacks"), cfg.ClonePackCache, clonecache.WithStore(s.store, s.log)); err != nil {
			return fmt.Errorf("RGIT_CLONE_CACHE_BYTES: %w", err)
		}
		s.clonePacks = eng.ClonePacks
		clonePackMetrics(w.reg, eng.ClonePacks)
	}
	w.eng = eng
	w.proto = gitserve.GitProtocol{Limits: gitproto.Limits{
		MaxPushRefs: cfg.MaxPushRefs, MaxPushOptions: cfg.MaxPushOptions,
		MaxWants: cfg.MaxWants, MaxHaves: cfg.MaxHaves, MaxArgBytes: cfg.MaxArgBytes,
		RequestTimeout: cfg.RequestTimeout,
		Negotiations:   gitproto.NewSlots(cfg.MaxNegotiations, cfg.NegotiationWait),
	}, Admission: w.admit}
	if w.gate, err = gitserve.NewGate(eng, w.proto, ""); err != nil {
		return err
	}
	if w.pm, err = gitserve.NewPromMetrics(w.reg); err != nil {
		return err
	}
	fm := forwardMetric(w.reg)
	if s.cluster != nil {
		// Forwarders follow "moved" answers by routing again through the
		// engine; set before any listener serves.
		s.cluster.httpFwd.Mover, s.cluster.sessions.Mover = eng, eng
		w.httpFwd, w.sessFwd = countedHTTP{s.cluster.httpFwd, fm}, countedSessions{s.cluster.sessions, fm}
	}
	s.trafficMetric(w.reg)
	return nil
}

// frontEnds are the handlers of the node's ports, all built before any
// port serves.
type frontEnds struct {
	public http.Handler // git over HTTP, health; the read API and page on a single node
	stream http.Handler // the peer stream (admin) port
	peer   http.Handler // the peer HTTP port; nil on a single node
	// internal is where /metrics goes when RGIT_METRICS_ADDR gives it no
	// port of its own: a single node's admin port, a cluster node's peer
	// HTTP port.
	internal *http.ServeMux
	metrics  http.Handler // /metrics on RGIT_METRICS_ADDR; nil when unset
}

// buildFrontEnds builds the HTTP, SSH and admin front ends both modes
// have, then a single node's or a cluster node's own.
func (s *Server) buildFrontEnds(w *wiring) (*frontEnds, error) {
	cfg, log := s.cfg, s.log
	// One budget of unauthenticated connections per client address,
	// shared by the public HTTP and SSH listeners: git, Git LFS and the
	// read API.
	w.anon = clientlimit.NewPerAddr(cfg.MaxAnonPerAddr, "RGIT_MAX_ANON_PER_ADDR")
	httpCfg := httpgit.Config{Resolver: w.eng, Protocol: w.proto, Auth: w.creds, MaxBody: cfg.MaxBody, Logger: log, Metrics: w.pm.For("http"),
		Unauthenticated: w.anon}
	if w.httpFwd != nil {
		httpCfg.Forward, httpCfg.Rerouter = w.httpFwd, w.eng
	}
	gitHTTP, err := httpgit.New(httpCfg)
	if err != nil {
		return nil, err
	}
	public := http.NewServeMux()
	gitHTTP.Register(public)
	public.HandleFunc("GET /healthz", s.healthz)
	public.HandleFunc("GET /ready", s.ready)
	public.HandleFunc("GET /status", s.status)
	if err := s.newLFS(w); err != nil {
		return nil, err
	}
	w.lfsPublic.Register(public)

	_, httpPort, _ := net.SplitHostPort(s.HTTPAddr)
	sshCfg := sshgit.Config{Addr: cfg.SSHAddr, HostKeyPath: cfg.HostKey, Resolver: w.eng, Protocol: w.proto, Keys: w.creds, Logger: log, Metrics: w.pm.For("ssh"),
		IdleTimeout: cfg.SSHIdle, StallTimeout: cfg.SSHStall, MinRate: cfg.MinRate, AuthTimeout: cfg.SSHAuth, Unauthenticated: w.anon,
		Extra: w.lfsPublic.SSH(httpPort)}
	if w.sessFwd != nil {
		sshCfg.Forward, sshCfg.Rerouter = w.sessFwd, w.eng
	}
	if s.sshSrv, err = sshgit.NewServer(sshCfg); err != nil {
		return nil, fmt.Errorf("RGIT_SSH_ADDR/RGIT_HOST_KEY: %w", err)
	}
	knownHosts := func(name string) (string, error) {
		names, err := sshgit.KnownHostsNames(s.SSHAddr, name)
		if err != nil {
			return "", err
		}
		return sshgit.KnownHostsLine(names, s.sshSrv.HostKey()), nil
	}
	if line, err := knownHosts(""); err == nil {
		// What a client's ~/.ssh/known_hosts needs (rgit-admin host-key
		// prints it too).
		log.Info("ssh host key", zap.String("fingerprint", gossh.FingerprintSHA256(s.sshSrv.HostKey())),
			zap.String("known_hosts", line), zap.String("public_key", sshgit.PublicKeyPath(cfg.HostKey)))
	}

	adm := &admin.Server{Node: s.node, Deps: w.deps, Auth: w.creds, Secret: s.PeerSecret, Log: log, GCMinAge: gcMinAge, Cache: w.purger,
		Self: cfg.Self, Version: s.version, PeerTLS: cfg.PeerTLS, Rollout: s.rollout, KnownHosts: knownHosts, Hooks: w.hooks}
	adminMux := http.NewServeMux()
	// Admin messages and, in a cluster, the leader's share one envelope
	// endpoint (peer.PathMsg) behind the peer secret.
	adminMux.Handle(peer.PathMsg, adm)
	adminMux.Handle("/debug/pprof/", admin.RequireSecret(s.PeerSecret, log, pprofHandler()))

	// The read API's origin: this node's repositories (in a cluster,
	// forwarding to their owners). One per node, so one admission of
	// expensive answers.
	origin := &api.Local{Gate: w.gate, Log: log, Limits: apiLimits(cfg), Metrics: api.NewMetrics(w.reg), LFS: w.lfsContent,
		Reads: admission.NewReads(w.admit, apiMaxActive(cfg.APIMaxActive), admission.ReadWait), Walks: api.NewWalkMemo(api.WalkMemoBytes)}
	fe := &frontEnds{}
	if s.cluster == nil {
		err = s.singleFrontEnds(w, fe, public, adminMux, origin)
	} else {
		err = s.clusterFrontEnds(w, fe, public, adminMux, adm, origin, httpCfg)
	}
	if err != nil {
		return nil, err
	}
	// Metrics name the build and version: never on the public port.
	metrics := promhttp.HandlerFor(w.reg, promhttp.HandlerOpts{})
	if cfg.MetricsAddr != "" {
		fe.metrics = metrics
	} else {
		fe.internal.Handle("GET /metrics", metrics)
	}
	return fe, nil
}

// singleFrontEnds completes a single node: the read API and the browse
// page on its public port; its admin port is the internal one (loopback
// unless RGIT_PEER_ADDR says otherwise).
func (s *Server) singleFrontEnds(w *wiring, fe *frontEnds, public, adminMux *http.ServeMux, origin *api.Local) error {
	h, err := api.New(api.Config{Auth: w.creds, Origin: origin, Cache: s.apiCache, Visibility: w.deps.Meta, Metrics: origin.Metrics, Log: s.log})
	if err != nil {
		return err
	}
	// The browse page's repository list, next to the API it reads.
	readAPI := web.WithRepoList(h, &web.RepoLister{Store: s.store, Auth: w.creds, Log: s.log})
	// The browse page renders from the read API, called in process, and
	// shows the SSH port in its clone URLs.
	if err := mountWeb(public, readAPI, w.anon, web.NewMetrics(w.reg), s.SSHAddr, s.cfg, s.log); err != nil {
		return err
	}
	fe.public = api.Mount(api.LimitUnauthenticated(w.anon, readAPI), public)
	fe.stream, fe.internal = adminMux, adminMux
	return nil
}

// clusterFrontEnds completes a cluster node. Its public port serves git
// only: the read API and the page are api-serve's (nodes refuse /api/
// there, and send browsers on). The peer stream port adds the leader's
// calls, forwarded git sessions and prewarm hints, and refuses everything
// without the peer secret; the peer HTTP port takes smart-HTTP requests
// forwarded by other nodes and api-serve's read API.
func (s *Server) clusterFrontEnds(w *wiring, fe *frontEnds, public, adminMux *http.ServeMux, adm *admin.Server, origin *api.Local, httpCfg httpgit.Config) error {
	cfg, log := s.cfg, s.log
	public.Handle("/", web.Elsewhere(cfg.WebURL, cfg.PublicURL))
	fe.public = api.Mount(api.Refused, public)
	s.cluster.hostKeys.setOwn(gossh.FingerprintSHA256(s.sshSrv.HostKey()))

	adm.Peers = s.cluster.dir
	s.cluster.mountPeer(adminMux, adm.Handlers(), s.PeerSecret, s.node,
		&peer.SessionHandler{Gate: w.gate, Forward: w.sessFwd, Rerouter: w.eng, Log: log}, log)
	adminMux.Handle("POST "+pathPrewarm, peer.RequireBearer(s.PeerSecret, log, http.HandlerFunc(s.prewarm.hinted)))
	fe.stream = peer.RequireBearer(s.PeerSecret, log, adminMux)

	peerCfg := httpCfg
	peerCfg.Metrics = w.pm.For("peer")
	peerCfg.SessionKind, peerCfg.FromPeers = actors.KindForwarded, true
	peerCfg.Unauthenticated = nil // every request comes from a peer node
	peerGit, err := httpgit.New(peerCfg)
	if err != nil {
		return err
	}
	origin.Forward, origin.Rerouter = s.cluster.httpFwd, w.eng
	peerAPI, err := api.New(api.Config{Auth: w.creds, Log: log, Origin: origin, Metrics: origin.Metrics})
	if err != nil {
		return err
	}
	peerMux := http.NewServeMux()
	peerMux.Handle("GET "+admin.RolloutPath, peer.RequireSecret(s.PeerSecret, log, http.HandlerFunc(s.rolloutStatus)))
	// /metrics goes here without the secret, so Prometheus can scrape:
	// the port is the fleet's internal one.
	peerRoutes := http.NewServeMux()
	peerGit.Register(peerRoutes)
	w.lfsPeer.Register(peerRoutes)
	peerMux.Handle("/", peer.PeerHTTP(s.PeerSecret, log, api.Mount(peerAPI, peerRoutes)))
	fe.peer, fe.internal = peerMux, peerMux
	return nil
}

// serve starts every server on its bound listener.
func (s *Server) serve(lns *listeners, fe *frontEnds) {
	tc := s.cfg.PeerTLS.ServerTLS()
	s.serveHTTP(lns.take(&lns.http), fe.public, nil, &s.httpSrv)
	sshLn := lns.take(&lns.ssh)
	go func() { s.serveErr <- ignoreClosed(s.sshSrv.Serve(sshLn), sshgit.ErrServerClosed) }()
	if fe.peer != nil {
		s.serveHTTP(lns.take(&lns.peer), fe.peer, tc, &s.peerSrv)
	}
	s.serveHTTP(lns.take(&lns.stream), fe.stream, tc, &s.adminSrv)
	if fe.metrics != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", fe.metrics)
		s.serveHTTP(lns.take(&lns.metrics), mux, nil, &s.metricsSrv)
	}
}

// newLFS builds the Git LFS front ends of the public and the peer HTTP
// ports (the same endpoints; the peer's trusts the forwarding node's
// word on where the client is) and the read API's content of pointers.
func (s *Server) newLFS(w *wiring) error {
	m, err := lfs.NewMetrics(w.reg)
	if err != nil {
		return err
	}
	c := lfs.Config{Gate: w.gate, Auth: w.creds, Store: s.store, Locks: w.eng, Secret: s.PeerSecret, PublicURL: s.cfg.PublicURL,
		Limits:  lfs.Limits{MaxObjectSize: s.cfg.LFSMaxObject, MaxBatchObjects: s.cfg.LFSMaxBatch, MaxAnonBatchObjects: s.cfg.LFSMaxAnonBatch, MaxBatchBytes: s.cfg.LFSMaxBatchBody},
		Metrics: m, Log: s.log}
	if w.httpFwd != nil {
		c.Forward, c.Rerouter = w.httpFwd, w.eng
	}
	c.Unauthenticated = w.anon
	if w.lfsPublic, err = lfs.New(c); err != nil {
		return err
	}
	c.Peer, c.SessionKind, c.Unauthenticated = true, actors.KindForwarded, nil
	if w.lfsPeer, err = lfs.New(c); err != nil {
		return err
	}
	w.lfsContent = lfs.NewContent(s.store, m, s.log)
	return nil
}

// pprofHandler serves net/http/pprof under /debug/pprof/. It is mounted
// only on the admin listener, behind the peer secret: profiles expose
// memory contents and a CPU profile costs the node while it runs.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also the named profiles (heap, goroutine, …)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// listeners are the node's ports, bound at the start of Start. Start
// takes each as it begins serving it; close closes those not taken.
type listeners struct {
	http, ssh, peer, stream, metrics net.Listener // peer: cluster mode only; metrics: RGIT_METRICS_ADDR set
}

// bind binds every port the configuration names, or none: the error
// names the variable of the port that failed.
func bind(cfg *config.Config) (*listeners, error) {
	streamAddr, err := cfg.PeerStreamAddr()
	if err != nil {
		return nil, fmt.Errorf("RGIT_PEER_ADDR: %w", err)
	}
	l := &listeners{}
	for _, p := range []struct {
		dst       *net.Listener
		addr, env string
		want      bool
	}{
		{&l.http, cfg.HTTPAddr, "RGIT_HTTP_ADDR", true},
		{&l.ssh, cfg.SSHAddr, "RGIT_SSH_ADDR", true},
		{&l.peer, cfg.PeerAddr, "RGIT_PEER_ADDR", cfg.Cluster()},
		{&l.stream, streamAddr, "RGIT_PEER_ADDR (stream port " + streamAddr + ")", true},
		{&l.metrics, cfg.MetricsAddr, "RGIT_METRICS_ADDR", cfg.MetricsAddr != ""},
	} {
		if !p.want {
			continue
		}
		if *p.dst, err = net.Listen("tcp", p.addr); err != nil {
			l.close()
			return nil, fmt.Errorf("%s: %w", p.env, err)
		}
	}
	return l, nil
}

// setAddrs records the bound addresses (the configuration may ask for
// port 0). /metrics is served on RGIT_METRICS_ADDR's own listener, else
// on the peer HTTP port (cluster) or the admin port.
func (s *Server) setAddrs(l *listeners) {
	s.HTTPAddr, s.SSHAddr, s.AdminAddr = l.http.Addr().String(), l.ssh.Addr().String(), l.stream.Addr().String()
	if l.peer != nil {
		s.PeerHTTPAddr = l.peer.Addr().String()
	}
	switch {
	case l.metrics != nil:
		s.MetricsAddr = l.metrics.Addr().String()
	case l.peer != nil:
		s.MetricsAddr = s.PeerHTTPAddr
	default:
		s.MetricsAddr = s.AdminAddr
	}
}

// take hands *ln over to its server.
func (l *listeners) take(ln *net.Listener) net.Listener {
	taken := *ln
	*ln = nil
	return taken
}

func (l *listeners) close() {
	for _, ln := range []net.Listener{l.http, l.ssh, l.peer, l.stream, l.metrics} {
		if ln != nil {
			ln.Close()
		}
	}
}

// serveHTTP serves h on ln, over TLS when tc is set (the peer ports).
func (s *Server) serveHTTP(ln net.Listener, h http.Handler, tc *tls.Config, dst **http.Server) {
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	srv := &http.Server{Handler: httpgit.Pace(h, clientlimit.Rate{Grace: s.cfg.HTTPBodyStall, BytesPerSec: s.cfg.MinRate}), ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout: s.cfg.HTTPIdle, ErrorLog: zap.NewStdLog(s.log)}
	*dst = srv
	go func() { s.serveErr <- ignoreClosed(srv.Serve(ln), http.ErrServerClosed) }()
}

func ignoreClosed(err, closed error) error {
	if errors.Is(err, closed) {
		return nil
	}
	return err
}

// WaitMaintenance returns once the node has no background pack
// maintenance scheduled or running (tests, benchmarks), or when ctx ends.
func (s *Server) WaitMaintenance(ctx context.Context) error { return s.node.WaitMaintenance(ctx) }

// Err reports a listener that stopped unexpectedly.
func (s *Server) Err() <-chan error { return s.serveErr }

// Shutdown drains: /ready fails; in cluster mode every lease is released
// through the drain so peers take the repositories over without fencing
// (requests arriving meanwhile are forwarded to the new owners); then
// listeners stop accepting, in-flight HTTP requests and SSH sessions get
// until ctx's deadline, and every database is closed cleanly.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.log.Info("draining")
	// The sweep opens repositories: it stops before the drain releases
	// them.
	s.endSweep()
	var errs []error
	if s.cluster != nil {
		s.hintSuccessors(ctx)
		if err := s.node.Drain(ctx); err != nil {
			errs = append(errs, err)
		}
		s.log.Info("leases released")
	}
	// All listeners drain at once: one after the other, each could take
	// most of the deadline (an idle-looking connection counts as active
	// for up to 5 s in net/http) and the sum exceeds it.
	shut := make(chan error, 5)
	stops := 0
	for _, srv := range []*http.Server{s.httpSrv, s.peerSrv, s.adminSrv, s.metricsSrv} {
		if srv != nil {
			stops++
			go func() { shut <- srv.Shutdown(ctx) }()
		}
	}
	if s.sshSrv != nil {
		stops++
		go func() { shut <- s.sshSrv.Shutdown(ctx) }()
	}
	for ; stops > 0; stops-- {
		if err := <-shut; err != nil {
			errs = append(errs, err)
		}
	}
	// Every git session is a session actor until its last byte, including
	// sessions forwarded here over hijacked connections, which the HTTP
	// server's Shutdown does not wait for.
	if err := s.node.WaitSessions(ctx); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.close())
	return errors.Join(errs...)
}

// startSweep runs the webhook sweep (hooks.Sweep) until ctx ends or the
// returned stop, which waits for it, is called.
func startSweep(ctx context.Context, node *actors.Node, d repo.Deps, every time.Duration, log *zap.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hooks.Sweep(ctx, node, d, every, log)
	}()
	return func() {
		cancel()
		<-done
	}
}

// endSweep stops the webhook sweep, if it runs, and waits for it.
func (s *Server) endSweep() {
	if s.stopSweep != nil {
		s.stopSweep()
		s.stopSweep = nil
	}
}

// close releases everything Start opened, in reverse order.
func (s *Server) close() error {
	var errs []error
	if s.stopBackground != nil {
		s.stopBackground()
	}
	s.endSweep()
	s.bitmaps.Close()
	if s.node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		errs = append(errs, s.node.Shutdown(ctx))
	}
	if s.clonePacks != nil {
		errs = append(errs, s.clonePacks.Close()) // waits for uploads
	}
	if s.cache != nil {
		errs = append(errs, s.cache.Close())
	}
	s.cluster.close()
	if s.apiCache != nil {
		errs = append(errs, s.apiCache.Close())
	}
	return errors.Join(errs...)
}

// peerSecret is RGIT_PEER_SECRET, or on a single node a secret generated
// once into the cache directory, where rgit-admin finds it.
func peerSecret(cfg *config.Config) (string, error) {
	if cfg.PeerSecret != "" {
		return cfg.PeerSecret, nil
	}
	path := filepath.Join(cfg.CacheDir, "peer_secret")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return strings.TrimSpace(string(b)), nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	secret := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write generated peer secret: %w", err)
	}
	return secret, nil
}

// healthz is liveness: 200 while the process runs, with the store's
// health and the number of open repositories. A store outage does not
// fail it: a restart cannot fix the store, and would close the
// repositories the node still serves.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	open, _ := s.node.OpenRepos(r.Context())
	fmt.Fprintf(w, "ok\n%s\n%s\nopen_repos %d\n", s.storeLine(), s.cacheLine(), len(open))
}

// ready is readiness: 200 only while serving; the body names the
// traffic state, the store's health and the cache disk's. A full cache
// disk leaves the node serving too: reads come from the store meanwhile. A store outage leaves a serving
// node serving: every node shares the store, so taking them out of the
// load balancer would only stop the warm repositories they still serve
// (cold ones answer 503 with Retry-After on their own).
func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	st := s.traffic()
	if st != Serving {
		http.Error(w, st.String()+"\n"+s.storeLine()+"\n"+s.cacheLine(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "%s\n%s\n%s\n", st, s.storeLine(), s.cacheLine())
}

// downProbe is how often the store is probed while it is down.
const downProbe = time.Second

// checkStore runs objstore.Verify with a bound of its own (the store's
// request timeout is for pack transfers, far too long for a probe) and
// names the store in the error.
func (s *Server) checkStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := objstore.Verify(ctx, s.store); err != nil {
		return fmt.Errorf("object store %s: %w", objstore.Describe(s.store), err)
	}
	return nil
}

// probeStore re-verifies the store every probeEvery, and every
// downProbe while the store is down or failing, so that its return is
// seen within seconds even when no request tries it. /healthz, /ready and
// /status report each probe's outcome as it is, and each change is
// logged once.
func (s *Server) probeStore(ctx context.Context) {
	t := time.NewTicker(min(s.probeEvery, downProbe))
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if since := time.Since(last); since < s.probeEvery && !(s.storeDown() && since >= downProbe) {
			continue
		}
		last = time.Now()
		// A probe: the one kind of request a store known to be down is
		// still sent.
		err := s.checkStore(guard.Probe(ctx))
		if ctx.Err() != nil {
			return
		}
		was := s.storeFault.Load()
		switch {
		case err != nil:
			fault := err.Error()
			s.storeFault.Store(&fault)
			if was == nil || *was != fault {
				s.log.Error("object store failed its health probe", zap.Error(err))
			}
		case was != nil:
			s.storeFault.Store(nil)
			s.log.Info("object store passed its health probe again")
		}
	}
}

// buildInfoMetric is rgit_build_info: a constant 1 labelled with the build,
// so dashboards can show which version each node runs.
func buildInfoMetric(b version.Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rgit_build_info",
		Help: "The running build: always 1, labelled with version, commit and Go version.",
	}, []string{"version", "commit", "go_version"})
	g.WithLabelValues(b.Version, b.Commit, b.GoVersion).Set(1)
	return g
}

// commitMetric records every ref-database commit's latency by outcome.
func commitMetric(reg prometheus.Registerer) func(time.Duration, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rgit_refdb_commit_seconds",
		Help:    "Latency of ref-database commits (durable in the object store), by outcome.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"result"})
	reg.MustRegister(h)
	return func(d time.Duration, err error) {
		result := "ok"
		switch {
		case errors.Is(err, refdb.ErrConflict):
			result = "conflict"
		case errors.Is(err, refdb.ErrFenced):
			result = "fenced"
		case err != nil:
			result = "error"
		}
		h.WithLabelValues(result).Observe(d.Seconds())
	}
}

// cacheMetrics adapts pack cache events to Prometheus.
type cacheMetrics struct {
	hits, misses, evictions, corrupt prometheus.Counter
	fetched, writeErrs               prometheus.Counter
}

func newCacheMetrics(reg prometheus.Registerer) *cacheMetrics {
	c := func(name, help string) prometheus.Counter {
		m := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(m)
		return m
	}
	return &cacheMetrics{
		hits:      c("rgit_pack_cache_hits_total", "Pack cache lookups served locally."),
		misses:    c("rgit_pack_cache_misses_total", "Pack cache lookups that downloaded the pack."),
		evictions: c("rgit_pack_cache_evictions_total", "Packs evicted from the local cache."),
		corrupt:   c("rgit_pack_cache_corrupt_total", "Cached or downloaded packs that failed verification."),
		fetched:   c("rgit_pack_cache_fetched_bytes_total", "Bytes downloaded into the pack cache."),
		writeErrs: c("rgit_pack_cache_write_errors_total", "Packs the cache disk had no room for (full, over quota or failing): served from memory, uncached, or refused."),
	}
}

func (m *cacheMetrics) Hit()              { m.hits.Inc() }
func (m *cacheMetrics) Miss(bytes int64)  { m.misses.Inc(); m.fetched.Add(float64(bytes)) }
func (m *cacheMetrics) Evict(bytes int64) { m.evictions.Inc() }
func (m *cacheMetrics) Corrupt()          { m.corrupt.Inc() }
func (m *cacheMetrics) WriteError()       { m.writeErrs.Inc() }

// maintSlots maps RGIT_MAINTENANCE_SLOTS (0: off) to the node's setting
// (negative: off).
func maintSlots(configured int) int {
	if configured == 0 {
		return -1
	}
	return configured
}

// memoryLimits derives the node's admission limits from the cgroup memory
// limit, RGIT_MEMORY_LIMIT (configured) and RLIMIT_NOFILE, and sets the Go
// runtime's soft memory limit and collector target from them unless
// GOMEMLIMIT or GOGC say otherwise.
func memoryLimits(configured int64, log *zap.Logger) admission.Limits {
	var cgroup int64
	for _, f := range admission.CgroupFiles {
		if b, err := os.ReadFile(f); err == nil {
			if n, ok := admission.ParseCgroupLimit(string(b)); ok {
				cgroup = n
				break
			}
		}
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	l := admission.Derive(cgroup, configured, lim.Cur)
	if l.GoMemLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(l.GoMemLimit)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(l.GCPercent)
	}
	if l.Memory == 0 {
		log.Warn("no memory budget (no cgroup limit, RGIT_MEMORY_LIMIT unset): pack work is admitted without a memory bound",
			zap.Int("max_active", l.MaxActive), zap.Int("gc_percent", l.GCPercent))
	} else {
		log.Info("memory budget", zap.Int64("budget_bytes", l.Memory), zap.Int64("cgroup_bytes", cgroup),
			zap.Int64("pack_work_bytes", l.Work), zap.Int64("gomemlimit_bytes", l.GoMemLimit), zap.Int("max_active", l.MaxActive))
	}
	return l
}

// apiLimits are the read API's limits per answer from the configuration.
func apiLimits(cfg *config.Config) api.Limits {
	return api.Limits{MaxEntries: cfg.APIMaxEntries, MaxDiffFiles: cfg.APIMaxDiffFiles, MaxDiffBytes: int(cfg.APIMaxDiffBytes),
		MaxDiffFileBytes: cfg.APIMaxDiffFileBytes, DiffTimeout: cfg.APIDiffTimeout, RenameLimit: cfg.APIRenameLimit,
		MaxLogScan: cfg.APIMaxLogScan, MaxArchiveBytes: cfg.APIMaxArchiveBytes,
		MaxBlameCommits: cfg.APIMaxBlameCommits, BlameTimeout: cfg.APIBlameTimeout, MaxBlameFileBytes: cfg.APIMaxBlameFileBytes,
		MaxSearchBytes: cfg.APISearchMaxBytes, MaxSearchFiles: cfg.APISearchMaxFiles, MaxSearchBlobs: cfg.APISearchMaxBlobs,
		SearchTimeout: cfg.APISearchTimeout, MaxSearchFileBytes: cfg.APISearchMaxFileBytes,

		MaxLastCommitScan: cfg.APILastCommitScan, LastCommitTimeout: cfg.APILastCommitTimeout}
}

// apiMaxActive is RGIT_API_MAX_ACTIVE, or four times the CPUs the
// runtime uses (at least 8) when it is 0: expensive answers are CPU work,
// and a few share a core well (an archive also waits on its client).
func apiMaxActive(configured int) int {
	if configured > 0 {
		return configured
	}
	return max(4*runtime.GOMAXPROCS(0), 8)
}

// mountWeb mounts a single node's browse page on mux for every path
// nothing else serves; it reads the API through readAPI. The page shares
// its port with git, so its public URL is RGIT_PUBLIC_URL unless
// RGIT_WEB_URL says otherwise, and strangers' page requests count in
// anon, git's per-address budget.
func mountWeb(mux *http.ServeMux, readAPI http.Handler, anon *clientlimit.PerAddr, metrics *web.Metrics, sshAddr string, cfg *config.Config, log *zap.Logger) error {
	_, sshPort, err := net.SplitHostPort(sshAddr)
	if err != nil {
		return fmt.Errorf("web page: SSH address %q: %w", sshAddr, err)
	}
	page, err := web.New(web.Config{API: readAPI, GitHere: true, SSHPort: sshPort, Log: log, Metrics: metrics,
		PageURL: cmp.Or(cfg.WebURL, cfg.PublicURL), CloneURL: cfg.PublicURL, SSHURL: cfg.PublicSSHURL})
	if err != nil {
		return err
	}
	mux.Handle("/", page.LimitUnauthenticated(anon))
	return nil
}

// openAPICache connects the read API's cache (RGIT_REDIS_URL) and checks
// Redis's eviction policy; nil when unset. Nodes need it even where
// api-serve does the caching: pushes, visibility flips and deletes
// invalidate from here.
func openAPICache(ctx context.Context, cfg *config.Config, log *zap.Logger) (*api.Cache, error) {
	if cfg.RedisURL == "" {
		return nil, nil
	}
	c, err := api.OpenCache(cfg.RedisURL, log, api.CacheOptions{})
	if err != nil {
		return nil, fmt.Errorf("RGIT_REDIS_URL: %w", err)
	}
	c.CheckPolicy(ctx)
	return c, nil
}

// clonePackMetrics exports where the clone packs this node served came
// from: built here, its own disk, or the store (built by another node).
func clonePackMetrics(reg prometheus.Registerer, c *clonecache.Cache) {
	for source, n := range map[string]func(clonecache.Stats) int64{
		"built":  func(s clonecache.Stats) int64 { return s.Misses },
		"local":  func(s clonecache.Stats) int64 { return s.Hits },
		"shared": func(s clonecache.Stats) int64 { return s.SharedHits },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "rgit_clone_packs_total", Help: "Clone packs served, by where they came from (built, local disk, shared through the store).",
			ConstLabels: prometheus.Labels{"source": source}},
			func() float64 { return float64(n(c.Stats())) }))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "rgit_clone_pack_uploads_total", Help: "Clone packs this node stored for other nodes."},
		func() float64 { return float64(c.Stats().Uploads) }))
}
