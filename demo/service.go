// Package demo is a small game-challenge backend to aim load tests at: a JSON
// HTTP API and a gRPC event-ingestion service over a database reached
// through a connection pool that starts empty, so a cold start is real.
//
// The database is either embedded and simulated (default: latencies of a
// remote database, nothing to install) or PostgreSQL through pgxpool. Under
// overload the service answers at once with 503 + Retry-After (gRPC
// UNAVAILABLE) instead of queueing without bound.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// service holds the wired parts; built by newService, run by serve.
type service struct {
	cfg   Config
	log   *slog.Logger
	db    database
	store *store
	api   *httpAPI
	grpc  *grpc.Server
}

func openDatabase(ctx context.Context, cfg Config) (database, error) {
	if cfg.DatabaseURL != "" {
		return openPostgres(ctx, cfg.DatabaseURL, cfg.PoolMax, cfg.AcquireTimeout)
	}
	return newMemDB(memDBConfig{
		MaxConns:       cfg.PoolMax,
		ConnSetup:      cfg.ConnSetup,
		QueryTime:      cfg.QueryTime,
		RowTime:        cfg.RowTime,
		AcquireTimeout: cfg.AcquireTimeout,
	})
}

func newService(cfg Config, db database, log *slog.Logger) *service {
	now := time.Now
	st := newStore(db, cfg.CacheTTL, cfg.CacheMaxPlayers, now)
	grpcMetrics := newRequestMetrics()
	api := &httpAPI{
		store:   st,
		metrics: metricsSource{db: db, store: st, http: newRequestMetrics(), grpc: grpcMetrics},
		log:     log,
		now:     now,
	}
	ingest := &eventIngest{db: db, log: log, now: now}
	return &service{cfg: cfg, log: log, db: db, store: st, api: api, grpc: newGRPCServer(ingest, grpcMetrics)}
}

// Run opens the database, listens on cfg's addresses and serves until ctx
// is done; then it stops accepting, lets in-flight requests finish (at most
// cfg.ShutdownTimeout) and closes the pool.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if errs := cfg.Validate(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	db, err := openDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	svc := newService(cfg, db, log)
	var lc net.ListenConfig
	httpLn, err := lc.Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		db.close()
		return fmt.Errorf("-http-addr: %w", err)
	}
	grpcLn, err := lc.Listen(ctx, "tcp", cfg.GRPCAddr)
	if err != nil {
		httpLn.Close()
		db.close()
		return fmt.Errorf("-grpc-addr: %w", err)
	}
	return svc.serve(ctx, httpLn, grpcLn)
}

// serve runs both servers on the given listeners until ctx is done or one
// fails, then shuts everything down, including the database.
func (s *service) serve(ctx context.Context, httpLn, grpcLn net.Listener) error {
	defer s.db.close()
	hs := &http.Server{
		Handler:           s.api.handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("demo service listening",
		"http", "http://"+httpLn.Addr().String(),
		"grpc", grpcLn.Addr().String(),
		"database", s.db.kind(),
		"pool_max", s.cfg.PoolMax,
		"acquire_timeout", s.cfg.AcquireTimeout.String())

	errc := make(chan error, 2)
	go func() {
		if err := hs.Serve(httpLn); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http server: %w", err)
		}
	}()
	go func() {
		if err := s.grpc.Serve(grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			errc <- fmt.Errorf("grpc server: %w", err)
		}
	}()

	var serveErr error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down")
	case serveErr = <-errc:
		s.log.Error("server failed, shutting down", "err", serveErr)
	}

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := hs.Shutdown(sctx); err != nil {
			s.log.Warn("http shutdown incomplete", "err", err)
			hs.Close()
		}
	})
	wg.Go(func() {
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-sctx.Done():
			s.log.Warn("grpc graceful stop timed out; stopping")
			s.grpc.Stop()
			<-done
		}
	})
	wg.Wait()
	s.log.Info("stopped")
	return serveErr
}
