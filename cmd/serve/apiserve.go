package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/cmd/config"
	"github.com/rgit/rgit/storage/auth"
	"github.com/rgit/rgit/storage/objstore/storeurl"
	"github.com/rgit/rgit/storage/repo"
	"github.com/rgit/rgit/transport/api"
	"github.com/rgit/rgit/transport/web"
)

// APIServer is a running `rgit api-serve`: the stateless read-API tier in
// front of a cluster's peer service (RGIT_UPSTREAM), with the optional
// Redis cache. It reads credentials from the object store itself, so a
// bad token is refused before any node is asked.
type APIServer struct {
	// Addr is the bound listen address.
	Addr     string
	srv      *http.Server
	upstream *api.Upstream
	cache    *api.Cache
	serveErr chan error
}

// StartAPI starts api-serve. It refuses to start without
// RGIT_PEER_SECRET: nodes answer browse requests only from peers.
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
	if s.cache, err = openAPICache(ctx, cfg, log); err != nil {
		return nil, err
	}
	creds := auth.NewStore(store)
	// Cached answers are served only while the name index says the
	// repository is public, read as the nodes read it: whether or not the
	// nodes could purge this cache, a repository made private stops being
	// served from it within the index cache's lifetime.
	h, err := api.New(api.Config{Auth: creds, Origin: up, Cache: s.cache, Visibility: repo.NewMetaCache(store, repo.MetaCacheOptions{}), Log: log})
	if err != nil {
		return nil, err
	}
	// The browse page, in front of this tier's API like a single node's.
	readAPI := web.WithRepoList(h, &web.RepoLister{Store: store, Auth: creds, Log: log})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	page, err := web.New(web.Config{API: readAPI, Log: log})
	if err != nil {
		return nil, err
	}
	mux.Handle("/", page)
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("RGIT_API_ADDR: %w", err)
	}
	s.Addr = ln.Addr().String()
	s.srv = &http.Server{Handler: api.Mount(readAPI, mux), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: cfg.HTTPIdle,
		ErrorLog: zap.NewStdLog(log)}
	go func() { s.serveErr <- ignoreClosed(s.srv.Serve(ln), http.ErrServerClosed) }()
	log.Info("rgit api-serve serving", zap.String("addr", s.Addr), zap.String("upstream", cfg.Upstream), zap.Bool("cache", s.cache != nil))
	return s, nil
}

// Err reports a listener that stopped unexpectedly.
func (s *APIServer) Err() <-chan error { return s.serveErr }

// Shutdown drains in-flight requests until ctx's deadline.
func (s *APIServer) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	return errors.Join(err, s.close())
}

func (s *APIServer) close() error {
	s.upstream.Close()
	if s.cache != nil {
		return s.cache.Close()
	}
	return nil
}
