package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/storeurl"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/node/config"
	"github.com/rgit/rgit/transport/node/version"
	"github.com/rgit/rgit/transport/product/admin"
	"github.com/rgit/rgit/transport/product/api"
	"github.com/rgit/rgit/transport/product/web"
	"github.com/rgit/rgit/transport/wire/clientlimit"
)

// APIServer is a running `rgit api-serve`: the stateless read-API tier in
// front of a cluster's peer service (RGIT_UPSTREAM), with the optional
// Redis cache. It reads credentials from the object store itself, so a
// bad token is refused before any node is asked.
type APIServer struct {
	// Addr is the bound listen address.
	Addr string
	// MetricsAddr is where /metrics listens (RGIT_METRICS_ADDR); "" when
	// unset: api-serve's one port is public, and metrics name the build.
	MetricsAddr string
	srv         *http.Server
	metricsSrv  *http.Server
	upstream    *api.Upstream
	cache       *api.Cache
	serveErr    chan error
}

// StartAPI starts api-serve: the read API, the web page, /healthz (the
// process answers) and /ready (the fleet and the store answer). It
// refuses to start without RGIT_PEER_SECRET: nodes answer browse
// requests only from peers.
func StartAPI(ctx context.Context, cfg *config.Config, log *zap.Logger) (*APIServer, error) {
	if cfg.PeerSecret == "" {
		return nil, errors.New("RGIT_PEER_SECRET: required by api-serve (the git nodes answer the read API only to peers)")
	}
	store, err := storeurl.Open(ctx, cfg.StoreURL, storeurl.Options{Timeout: cfg.StoreTimeout, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("RGIT_STORE_URL: %w", err)
	}
	up, err := api.NewUpstream(cfg.Upstream, cfg.PeerSecret, cfg.PeerTLS.ClientTLS(), log)
	if err != nil {
		return nil, fmt.Errorf("RGIT_UPSTREAM: %w", err)
	}
	s := &APIServer{upstream: up, serveErr: make(chan error, 1)}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if s.cache, err = openAPICache(ctx, cfg, log); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoMetric(version.Get()))
	h, err := s.handler(cfg, log, store, reg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("RGIT_API_ADDR: %w", err)
	}
	s.Addr = ln.Addr().String()
	s.srv = s.serve(ln, h, cfg, log)
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("RGIT_METRICS_ADDR: %w", err)
		}
		s.MetricsAddr = mln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		s.metricsSrv = s.serve(mln, mux, cfg, log)
	}
	log.Info("rgit api-serve serving", zap.String("addr", s.Addr), zap.String("upstream", cfg.Upstream), zap.Bool("cache", s.cache != nil),
		zap.String("web_url", cfg.WebURL), zap.String("public_url", cfg.PublicURL), zap.String("public_ssh_url", cfg.PublicSSHURL))
	if cfg.PublicURL == "" && cfg.PublicSSHURL == "" {
		log.Warn("the web page shows no clone URLs: set RGIT_PUBLIC_URL and RGIT_PUBLIC_SSH_URL to the git fleet's public addresses")
	}
	ok = true
	return s, nil
}

// serve serves h on ln until Shutdown.
func (s *APIServer) serve(ln net.Listener, h http.Handler, cfg *config.Config, log *zap.Logger) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: cfg.HTTPIdle, ErrorLog: zap.NewStdLog(log)}
	go func() {
		if err := ignoreClosed(srv.Serve(ln), http.ErrServerClosed); err != nil {
			select {
			case s.serveErr <- err:
			default: // one is enough to stop the process
			}
		}
	}()
	return srv
}

// handler is api-serve's one port: the read API, the browse page in
// front of it, /healthz and /ready. It reads credentials from the store
// itself, so a bad token is refused before any node is asked.
func (s *APIServer) handler(cfg *config.Config, log *zap.Logger, store objstore.Store, reg prometheus.Registerer) (http.Handler, error) {
	creds := auth.NewStore(store)
	// Cached answers are served only while the name index says the
	// repository is public, read as the nodes read it: whether or not the
	// nodes could purge this cache, a repository made private stops being
	// served from it within the index cache's lifetime.
	h, err := api.New(api.Config{Auth: creds, Origin: s.upstream, Cache: s.cache, Visibility: repo.NewMetaCache(store, repo.MetaCacheOptions{}),
		Metrics: api.NewMetrics(reg), Log: log})
	if err != nil {
		return nil, err
	}
	// The browse page, in front of this tier's API like a single node's.
	readAPI := web.WithRepoList(h, &web.RepoLister{Store: store, Auth: creds, Log: log})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("GET /ready", newReadiness(time.Second, log, func(ctx context.Context) error {
		if err := s.upstream.Probe(ctx, admin.RolloutPath); err != nil {
			return fmt.Errorf("%w: %w", errNoUpstream, err)
		}
		if _, err := store.Head(ctx, objstore.ProbePrefix+"api-serve-ready"); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("%w: %w", errNoStore, err)
		}
		return nil
	}))
	// The page does not serve git: its clone URLs are the configured
	// public ones, or none.
	page, err := web.New(web.Config{API: readAPI, Log: log, PageURL: cfg.WebURL, CloneURL: cfg.PublicURL, SSHURL: cfg.PublicSSHURL,
		Metrics: web.NewMetrics(reg)})
	if err != nil {
		return nil, err
	}
	// Strangers hold no more of this tier at once than of a node's, page
	// and API together.
	anon := clientlimit.NewPerAddr(cfg.MaxAnonPerAddr, "RGIT_MAX_ANON_PER_ADDR")
	mux.Handle("/", page.LimitUnauthenticated(anon))
	return api.Mount(api.LimitUnauthenticated(anon, readAPI), mux), nil
}

// Err reports a listener that stopped unexpectedly.
func (s *APIServer) Err() <-chan error { return s.serveErr }

// Shutdown drains in-flight requests until ctx's deadline.
func (s *APIServer) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if s.metricsSrv != nil {
		err = errors.Join(err, s.metricsSrv.Shutdown(ctx))
	}
	return errors.Join(err, s.close())
}

func (s *APIServer) close() error {
	s.upstream.Close()
	if s.cache != nil {
		return s.cache.Close()
	}
	return nil
}

// Why api-serve is not ready; the answer names only these, the log the
// details.
var (
	errNoUpstream = errors.New("the git fleet (RGIT_UPSTREAM) cannot be reached")
	errNoStore    = errors.New("the object store (RGIT_STORE_URL) cannot be reached")
	errUnchecked  = errors.New("first check running")
)

// readiness answers /ready from a check run at most once per interval
// (every) and never twice at once, however often it is asked: callers
// meanwhile get the last outcome, so an anonymous caller cannot make the
// probe cost the fleet or the store more, nor pile up waiting.
type readiness struct {
	every time.Duration
	check func(context.Context) error
	log   *zap.Logger

	mu      sync.Mutex
	running bool
	at      time.Time // of the last outcome; zero: none yet
	err     error
}

func newReadiness(every time.Duration, log *zap.Logger, check func(context.Context) error) *readiness {
	return &readiness{every: every, check: check, log: log, err: errUnchecked}
}

func (rd *readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rd.mu.Lock()
	due := !rd.running && (rd.at.IsZero() || time.Since(rd.at) >= rd.every)
	rd.running = rd.running || due
	err := rd.err
	rd.mu.Unlock()
	if due {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		err = rd.check(ctx)
		cancel()
		rd.mu.Lock()
		if (err == nil) != (rd.err == nil) || rd.at.IsZero() {
			if err != nil {
				rd.log.Warn("api-serve not ready", zap.Error(err))
			} else {
				rd.log.Info("api-serve ready")
			}
		}
		rd.running, rd.at, rd.err = false, time.Now(), err
		rd.mu.Unlock()
	}
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		reason := "not ready"
		for _, e := range []error{errNoUpstream, errNoStore, errUnchecked} {
			if errors.Is(err, e) {
				reason += ": " + e.Error()
			}
		}
		http.Error(w, reason, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}
