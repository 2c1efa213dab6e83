// Package serve assembles a running rgit node from its configuration: the
// object store, pack cache, actor system, git engine, HTTP, SSH and admin
// listeners, health and metrics, and the SIGTERM drain. cmd/rgit runs it;
// end-to-end tests start it in process. It may import everything.
package serve

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
	"github.com/rgit/rgit/cmd/config"
	"github.com/rgit/rgit/cmd/version"
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
	"github.com/rgit/rgit/transport/admin"
	"github.com/rgit/rgit/transport/admission"
	"github.com/rgit/rgit/transport/api"
	"github.com/rgit/rgit/transport/clientlimit"
	"github.com/rgit/rgit/transport/engine"
	"github.com/rgit/rgit/transport/gitproto"
	"github.com/rgit/rgit/transport/gitserve"
	"github.com/rgit/rgit/transport/hooks"
	"github.com/rgit/rgit/transport/httpgit"
	"github.com/rgit/rgit/transport/lfs"
	"github.com/rgit/rgit/transport/peer"
	"github.com/rgit/rgit/transport/sshgit"
	"github.com/rgit/rgit/transport/web"
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
	storeFault atomic.Pointer[string]
	probeEvery time.Duration
	admission  *admission.Controller // nil: derived from the memory budget
	stopProbe  context.CancelFunc
	// stopSweep ends the webhook sweep and waits for its visit in
	// progress; nil until it runs.
	stopSweep func()
	serveErr  chan error
	// given replaces the store RGIT_STORE_URL names (WithStore).
	given      objstore.Store
	clonePacks *clonecache.Cache // nil: RGIT_CLONE_CACHE_BYTES=0
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

// WithAdmission replaces the admission controller derived from the memory
// budget (tests hold its budget to see refusals).
func WithAdmission(c *admission.Controller) Option { return func(s *Server) { s.admission = c } }

// Start opens and verifies the store, opens the cache, starts the actors
// and every listener.
func Start(ctx context.Context, cfg *config.Config, log *zap.Logger, opts ...Option) (*Server, error) {
	s := &Server{cfg: cfg, log: log, serveErr: make(chan error, 4), probeEvery: 10 * time.Second, bitmaps: repo.NewBitmapBuilds()}
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
	skip, err := fsck.ParseSkipList(cfg.FsckSkip)
	if err != nil {
		return nil, fmt.Errorf("RGIT_FSCK_SKIP: %w", err)
	}
	var backend objstore.Store
	if s.given != nil {
		backend = objstore.WithTimeout(s.given, cfg.StoreTimeout)
	} else if backend, err = storeurl.Open(ctx, cfg.StoreURL, storeurl.Options{Timeout: cfg.StoreTimeout, Logger: log}); err != nil {
		return nil, fmt.Errorf("RGIT_STORE_URL: %w", err)
	}
	reg := prometheus.NewRegistry()
	s.guard = guard.New(backend, guard.Options{OpTimeout: cfg.StoreOpTimeout, OpTimeoutVar: "RGIT_STORE_OP_TIMEOUT_MS",
		Observer: newStoreMetrics(reg), Log: log})
	s.store = s.guard
	storeStateMetric(reg, s.guard)
	// Opening a store contacts nothing; a missing bucket or a wrong key
	// must stop the node here, not surface at the first push.
	if err := s.checkStore(ctx); err != nil {
		return nil, fmt.Errorf("RGIT_STORE_URL: %w", err)
	}
	build := version.Get()
	s.version, s.bootID = build.String(), rand.Text()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoMetric(build))
	limits := memoryLimits(cfg.MemoryLimit, log)
	s.cache, err = packcache.Open(cfg.CacheDir, s.store, log, packcache.WithMetrics(newCacheMetrics(reg)),
		packcache.WithMaxOpen(cmp.Or(cfg.MaxOpenPacks, limits.OpenPacks)))
	if err != nil {
		return nil, fmt.Errorf("RGIT_CACHE_DIR: %w", err)
	}
	cache := s.cache
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rgit_pack_files_open", Help: "Pack file descriptors the node holds open (bounded by RGIT_MAX_OPEN_PACKS)."},
		func() float64 { return float64(cache.Stats().Files) }))
	if s.PeerSecret, err = peerSecret(cfg); err != nil {
		return nil, err
	}
	deps := repo.Deps{Store: s.store, Cache: s.cache, Log: log,
		RefOpts: refdb.Options{FlushInterval: cfg.FlushInterval, ObserveCommit: commitMetric(reg)},
		Meta:    repo.NewMetaCache(s.store, repo.MetaCacheOptions{}),
		Ahead:   repo.NewListAhead(s.store)}
	credentials := auth.NewStore(s.store)
	if s.apiCache, err = openAPICache(ctx, cfg, log); err != nil {
		return nil, err
	}
	// Background work of the node's lifetime (store probe, joining,
	// prewarm) ends with this context.
	bgCtx, cancel := context.WithCancel(context.Background())
	s.stopProbe = cancel
	var clusterCfg *actors.ClusterConfig
	// Exported on every node (zeros on a single one): dashboards work the
	// same in either mode.
	s.prewarm = newPrewarmer(bgCtx, deps, log, reg)
	if cfg.Cluster() {
		if s.cluster, clusterCfg, err = newClusterSetup(cfg, s.PeerSecret, log); err != nil {
			return nil, err
		}
		clusterCfg.Joining, clusterCfg.OnGrant = true, s.prewarm.grant
	} else {
		s.prewarmed.Store(true) // nothing moves to a single node
	}
	if s.cluster == nil || s.cluster.leader == nil {
		// One node indexes repositories older than the name index before
		// serving; access is decided from the index (README: names).
		n, collisions, err := repo.MigrateIndex(ctx, deps, credentials)
		if err != nil {
			return nil, fmt.Errorf("name index migration: %w", err)
		}
		if n > 0 || len(collisions) > 0 {
			log.Info("name index migrated", zap.Int("indexed", n), zap.Strings("case_collisions", collisions))
		}
	}
	admit := s.admission
	if admit == nil {
		admit = admission.New(limits, reg)
	}
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
	var purger actors.CachePurger // nil unless there is a cache to purge
	if s.apiCache != nil {
		purger = s.apiCache
	}
	webhooks := hooks.New(hooks.Config{Allow: cfg.HookAllow, Timeout: cfg.HookTimeout, Concurrency: cfg.HookConcurrency,
		Policy: outbox.Policy{Window: cfg.HookRetry, FirstRetry: cfg.HookBackoff}, Log: log, Registerer: reg})
	s.node, err = actors.NewNode(actors.Config{Deps: deps, WarmTTL: cfg.WarmTTL, MaxWarm: cfg.MaxWarm, Cache: purger, Hooks: webhooks,
		MaintenanceSlots: maintSlots(cfg.MaintSlots), MaintenanceInterval: cfg.MaintInterval, Log: log, Registerer: reg, Cluster: clusterCfg,
		GCInterval: cfg.GCInterval, GCMinAge: gcMinAge,
		Reserve: func(objects int64) (func(), bool) {
			return admit.Reserve(admission.Maintenance, admission.Estimate(admission.Maintenance, objects))
		},
		// Roll-ups allocate what admission does not count: once they are
		// over, the trimmer looks at once rather than at its next tick.
		MaintenanceDone: trim.Check})
	if err != nil {
		return nil, err
	}
	s.stopSweep = startSweep(bgCtx, s.node, deps, cfg.HookSweep, log)
	eng := &engine.Engine{Node: s.node, Deps: deps, IncomingDir: s.cache.TempDir(), Fsck: fsck.Options{Skip: skip, Strict: cfg.FsckStrict}, Log: log,
		MaxObjectSize: cfg.MaxObjectSize, MaxPackSize: cfg.MaxPackSize, MaxDeltaDepth: cfg.MaxDeltaDepth, Admission: admit, Bitmaps: s.bitmaps}
	if s.apiCache != nil {
		eng.RefsWatch = s.apiCache
	}
	if cfg.ClonePackCache > 0 {
		// Shared through the store: a cold node streams a pack another
		// node built instead of building it again.
		if eng.ClonePacks, err = clonecache.New(filepath.Join(cfg.CacheDir, "clonepacks"), cfg.ClonePackCache, clonecache.WithStore(s.store, log)); err != nil {
			return nil, fmt.Errorf("RGIT_CLONE_CACHE_BYTES: %w", err)
		}
		s.clonePacks = eng.ClonePacks
		clonePackMetrics(reg, eng.ClonePacks)
	}
	pm, err := gitserve.NewPromMetrics(reg)
	if err != nil {
		return nil, err
	}

	httpFwd, sessFwd := s.cluster.forwarders()
	var countedFwd httpgit.Forwarder
	fm := forwardMetric(reg)
	if s.cluster != nil {
		// Forwarders follow "moved" answers by routing again through the
		// engine; set before any listener exists.
		s.cluster.httpFwd.Mover, s.cluster.sessions.Mover = eng, eng
		countedFwd, sessFwd = countedHTTP{httpFwd, fm}, countedSessions{s.cluster.sessions, fm}
	}
	s.trafficMetric(reg)
	// One protocol engine per node: its limits, and the negotiation slots
	// above all, are shared by the HTTP, SSH and peer front ends.
	proto := gitserve.ProtoEngine{Limits: gitproto.Limits{
		MaxPushRefs: cfg.MaxPushRefs, MaxPushOptions: cfg.MaxPushOptions,
		MaxWants: cfg.MaxWants, MaxHaves: cfg.MaxHaves, MaxArgBytes: cfg.MaxArgBytes,
		RequestTimeout: cfg.RequestTimeout,
		Negotiations:   gitproto.NewSlots(cfg.MaxNegotiations, cfg.NegotiationWait),
	}, Admission: admit}
	// One budget of unauthenticated connections per client address,
	// shared by the public HTTP and SSH listeners.
	anon := clientlimit.NewPerAddr(cfg.MaxAnonPerAddr, "RGIT_MAX_ANON_PER_ADDR")
	go trim.Run(bgCtx)
	httpCfg := httpgit.Config{Resolver: eng, Engine: proto, Auth: credentials, MaxBody: cfg.MaxBody, Logger: log, Metrics: pm.For("http"),
		Unauthenticated: anon}
	if httpFwd != nil {
		httpCfg.Forward, httpCfg.Rerouter = countedFwd, eng
	}
	gitHTTP, err := httpgit.New(httpCfg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	gitHTTP.Register(mux)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /ready", s.ready)
	mux.HandleFunc("GET /status", s.status)
	// Metrics name the build and version: never on the public port.
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	apiGate, err := gitserve.NewGate(eng, proto, "")
	if err != nil {
		return nil, err
	}
	lfsPublic, lfsPeer, lfsContent, err := s.newLFS(apiGate, eng, credentials, countedFwd, reg)
	if err != nil {
		return nil, err
	}
	lfsPublic.Register(mux)
	// One read-API origin configuration for the public port and the peer
	// port: the same limits, and one admission of expensive answers.
	apiReads := admission.NewReads(admit, apiMaxActive(cfg.APIMaxActive), admission.ReadWait)
	apiMetrics := api.NewMetrics(reg)
	apiLocal := func(fwd api.Forwarder) *api.Local {
		l := &api.Local{Gate: apiGate, Forward: fwd, Log: log, Limits: apiLimits(cfg), Reads: apiReads, Metrics: apiMetrics, LFS: lfsContent}
		if fwd != nil {
			l.Rerouter = eng
		}
		return l
	}
	// The read API: a single node answers it on its public port; in a
	// cluster it is api-serve's, and nodes answer it only from peers.
	var publicAPI http.Handler = api.Refused
	if s.cluster == nil {
		if publicAPI, err = api.New(api.Config{Auth: credentials, Origin: apiLocal(nil), Cache: s.apiCache,
			Visibility: deps.Meta, Log: log}); err != nil {
			return nil, err
		}
	}
	if s.cluster == nil {
		// The browse page's repository list, next to the API it reads.
		publicAPI = web.WithRepoList(publicAPI, &web.RepoLister{Store: s.store, Auth: credentials, Log: log})
	}
	s.HTTPAddr = s.serveHTTP(lns.take(&lns.http), api.Mount(publicAPI, mux), nil, &s.httpSrv)

	_, httpPort, _ := net.SplitHostPort(s.HTTPAddr)
	sshCfg := sshgit.Config{Addr: cfg.SSHAddr, HostKeyPath: cfg.HostKey, Resolver: eng, Engine: proto, Keys: credentials, Logger: log, Metrics: pm.For("ssh"),
		IdleTimeout: cfg.SSHIdle, StallTimeout: cfg.SSHStall, MinRate: cfg.MinRate, AuthTimeout: cfg.SSHAuth, Unauthenticated: anon,
		Extra: lfsPublic.SSH(httpPort)}
	if sessFwd != nil {
		sshCfg.Forward, sshCfg.Rerouter = sessFwd, eng
	}
	s.sshSrv, err = sshgit.NewServer(sshCfg)
	if err != nil {
		return nil, fmt.Errorf("RGIT_SSH_ADDR/RGIT_HOST_KEY: %w", err)
	}
	sshLn := lns.take(&lns.ssh)
	s.SSHAddr = sshLn.Addr().String()
	knownHosts := func(name string) (string, error) {
		names, err := sshgit.KnownHostsNames(s.SSHAddr, name)
		if err != nil {
			return "", err
		}
		return sshgit.KnownHostsLine(names, s.sshSrv.HostKey()), nil
	}
	if s.cluster != nil {
		s.cluster.hostKeys.setOwn(gossh.FingerprintSHA256(s.sshSrv.HostKey()))
	}
	if line, err := knownHosts(""); err == nil {
		// What a client's ~/.ssh/known_hosts needs (rgit-admin host-key
		// prints it too).
		log.Info("ssh host key", zap.String("fingerprint", gossh.FingerprintSHA256(s.sshSrv.HostKey())),
			zap.String("known_hosts", line), zap.String("public_key", sshgit.PublicKeyPath(cfg.HostKey)))
	}
	if s.cluster == nil {
		// The browse page, on a single node only: it renders from the read
		// API, called in process (in a cluster, nodes refuse /api/ on their
		// public port). Mounted once the SSH port is known, for its clone
		// URLs.
		if err := mountWeb(mux, publicAPI, s.SSHAddr, cfg, log); err != nil {
			return nil, err
		}
	} else {
		// The page is api-serve's: browsers are sent there, or told how
		// to clone from here.
		mux.Handle("/", web.Elsewhere(cfg.WebURL, cfg.PublicURL))
	}
	go func() { s.serveErr <- ignoreClosed(s.sshSrv.Serve(sshLn), sshgit.ErrServerClosed) }()

	adm := &admin.Server{Node: s.node, Deps: deps, Auth: credentials, Secret: s.PeerSecret, Log: log, GCMinAge: gcMinAge, Cache: purger,
		Self: cfg.Self, Version: build.String(), PeerTLS: cfg.PeerTLS, Rollout: s.rollout, KnownHosts: knownHosts, Hooks: webhooks}
	if s.cluster != nil {
		adm.Peers = s.cluster.dir
	}
	adminMux := http.NewServeMux()
	// Admin messages and, in a cluster, the leader's share one envelope
	// endpoint (peer.PathMsg) behind the peer secret.
	adminMux.Handle(peer.PathMsg, adm)
	adminMux.Handle("/debug/pprof/", admin.RequireSecret(s.PeerSecret, log, pprofHandler()))
	if cfg.MetricsAddr == "" && s.cluster == nil {
		// A single node's internal port: loopback unless RGIT_PEER_ADDR
		// says otherwise.
		adminMux.Handle("GET /metrics", metrics)
	}
	if s.cluster != nil {
		gate, err := gitserve.NewGate(eng, proto, "")
		if err != nil {
			return nil, err
		}
		s.cluster.mountPeer(adminMux, adm.Handlers(), s.PeerSecret, s.node,
			&peer.SessionHandler{Gate: gate, Forward: sessFwd, Rerouter: eng, Log: log}, log)
		adminMux.Handle("POST "+pathPrewarm, peer.RequireBearer(s.PeerSecret, log, http.HandlerFunc(s.prewarm.hinted)))
		// The peer HTTP port: smart-HTTP requests forwarded by other nodes.
		peerCfg := httpCfg
		peerCfg.Metrics = pm.For("peer")
		peerCfg.SessionKind, peerCfg.FromPeers = gitserve.KindForwarded, true
		peerCfg.Unauthenticated = nil // every request comes from a peer node
		peerGit, err := httpgit.New(peerCfg)
		if err != nil {
			return nil, err
		}
		peerAPI, err := api.New(api.Config{Auth: credentials, Log: log,
			Origin: apiLocal(httpFwd)})
		if err != nil {
			return nil, err
		}
		peerRoutes := http.NewServeMux()
		peerGit.Register(peerRoutes)
		lfsPeer.Register(peerRoutes)
		peerMux := http.NewServeMux()
		peerMux.Handle("GET "+admin.RolloutPath, peer.RequireSecret(s.PeerSecret, log, http.HandlerFunc(s.rolloutStatus)))
		if cfg.MetricsAddr == "" {
			// Without the secret, so Prometheus can scrape; the port is
			// the fleet's internal one.
			peerMux.Handle("GET /metrics", metrics)
		}
		peerMux.Handle("/", peer.PeerHTTP(s.PeerSecret, log, api.Mount(peerAPI, peerRoutes)))
		s.PeerHTTPAddr = s.serveHTTP(lns.take(&lns.peer), peerMux, cfg.PeerTLS.ServerTLS(), &s.peerSrv)
	}
	var streamHandler http.Handler = adminMux
	if s.cluster != nil {
		// The peer stream port refuses everything without the secret, even
		// paths it does not serve.
		streamHandler = peer.RequireBearer(s.PeerSecret, log, adminMux)
	}
	s.AdminAddr = s.serveHTTP(lns.take(&lns.stream), streamHandler, cfg.PeerTLS.ServerTLS(), &s.adminSrv)
	switch {
	case cfg.MetricsAddr != "":
		metricsMux := http.NewServeMux()
		metricsMux.Handle("GET /metrics", metrics)
		s.MetricsAddr = s.serveHTTP(lns.take(&lns.metrics), metricsMux, nil, &s.metricsSrv)
	case s.cluster != nil:
		s.MetricsAddr = s.PeerHTTPAddr
	default:
		s.MetricsAddr = s.AdminAddr
	}

	go s.probeStore(bgCtx)
	log.Info("rgit serving", zap.String("version", build.String()), zap.String("http", s.HTTPAddr), zap.String("ssh", s.SSHAddr),
		zap.String("admin", s.AdminAddr), zap.String("peer_http", s.PeerHTTPAddr), zap.String("metrics", s.MetricsAddr), zap.String("self", cfg.Self), zap.Bool("peer_tls", cfg.PeerTLS != nil),
		zap.String("store", cfg.StoreURL), zap.String("cache", cfg.CacheDir))
	ok = true
	s.started.Store(true)
	go s.join(bgCtx)
	return s, nil
}

// newLFS builds the Git LFS front ends of the public and the peer HTTP
// ports (the same endpoints; the peer's trusts the forwarding node's
// word on where the client is) and the read API's content of pointers.
func (s *Server) newLFS(gate *gitserve.Gate, eng *engine.Engine, tokens auth.TokenSource, fwd httpgit.Forwarder, reg prometheus.Registerer) (public, peer *lfs.Server, content *lfs.Content, err error) {
	m, err := lfs.NewMetrics(reg)
	if err != nil {
		return nil, nil, nil, err
	}
	c := lfs.Config{Gate: gate, Auth: tokens, Store: s.store, Locks: eng, Secret: s.PeerSecret, PublicURL: s.cfg.PublicURL,
		Limits:  lfs.Limits{MaxObjectSize: s.cfg.LFSMaxObject, MaxBatchObjects: s.cfg.LFSMaxBatch, MaxBatchBytes: s.cfg.LFSMaxBatchBody},
		Metrics: m, Log: s.log}
	if fwd != nil {
		c.Forward, c.Rerouter = fwd, eng
	}
	if public, err = lfs.New(c); err != nil {
		return nil, nil, nil, err
	}
	c.Peer, c.SessionKind = true, gitserve.KindForwarded
	if peer, err = lfs.New(c); err != nil {
		return nil, nil, nil, err
	}
	return public, peer, lfs.NewContent(s.store, m, s.log), nil
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

// serveHTTP serves h on ln, over TLS when tc is set (the peer ports), and
// returns the bound address.
func (s *Server) serveHTTP(ln net.Listener, h http.Handler, tc *tls.Config, dst **http.Server) string {
	addr := ln.Addr().String()
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	srv := &http.Server{Handler: httpgit.Pace(h, clientlimit.Rate{Grace: s.cfg.HTTPBodyStall, BytesPerSec: s.cfg.MinRate}), ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout: s.cfg.HTTPIdle, ErrorLog: zap.NewStdLog(s.log)}
	*dst = srv
	go func() { s.serveErr <- ignoreClosed(srv.Serve(ln), http.ErrServerClosed) }()
	return addr
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
	if s.stopProbe != nil {
		s.stopProbe()
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
	fmt.Fprintf(w, "ok\n%s\nopen_repos %d\n", s.storeLine(), len(open))
}

// ready is readiness: 200 only while serving; the body names the
// traffic state and the store's health. A store outage leaves a serving
// node serving: every node shares the store, so taking them out of the
// load balancer would only stop the warm repositories they still serve
// (cold ones answer 503 with Retry-After on their own).
func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	st := s.traffic()
	if st != Serving {
		http.Error(w, st.String()+"\n"+s.storeLine(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "%s\n%s\n", st, s.storeLine())
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
	fetched                          prometheus.Counter
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
	}
}

func (m *cacheMetrics) Hit()              { m.hits.Inc() }
func (m *cacheMetrics) Miss(bytes int64)  { m.misses.Inc(); m.fetched.Add(float64(bytes)) }
func (m *cacheMetrics) Evict(bytes int64) { m.evictions.Inc() }
func (m *cacheMetrics) Corrupt()          { m.corrupt.Inc() }

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
		MaxLogScan: cfg.APIMaxLogScan, MaxArchiveBytes: cfg.APIMaxArchiveBytes}
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
// RGIT_WEB_URL says otherwise.
func mountWeb(mux *http.ServeMux, readAPI http.Handler, sshAddr string, cfg *config.Config, log *zap.Logger) error {
	_, sshPort, err := net.SplitHostPort(sshAddr)
	if err != nil {
		return fmt.Errorf("web page: SSH address %q: %w", sshAddr, err)
	}
	page, err := web.New(web.Config{API: readAPI, GitHere: true, SSHPort: sshPort, Log: log,
		PageURL: cmp.Or(cfg.WebURL, cfg.PublicURL), CloneURL: cfg.PublicURL, SSHURL: cfg.PublicSSHURL})
	if err != nil {
		return err
	}
	mux.Handle("/", page)
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
