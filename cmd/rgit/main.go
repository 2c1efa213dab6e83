// Command rgit is the rgit server. `rgit serve` runs a node configured by
// RGIT_* environment variables (see README.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rgit/rgit/cmd/config"
	"github.com/rgit/rgit/cmd/serve"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: rgit serve\n\nConfiguration is read from the environment:")
		for _, v := range config.Vars {
			fmt.Fprintf(os.Stderr, "  %-24s %s (default %q)\n", v.Name, v.Help, v.Default)
		}
		os.Exit(2)
	}
	cfg, err := config.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rgit: bad configuration:\n"+err.Error())
		os.Exit(2)
	}
	log, err := newLogger(cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rgit:", err)
		os.Exit(2)
	}
	defer log.Sync()
	if err := run(cfg, log); err != nil {
		log.Error("rgit stopped", zap.Error(err))
		os.Exit(1)
	}
}

func run(cfg *config.Config, log *zap.Logger) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	srv, err := serve.Start(context.Background(), cfg, log)
	if err != nil {
		return err
	}
	select {
	case s := <-sig:
		log.Info("signal received; draining", zap.String("signal", s.String()), zap.Duration("deadline", cfg.DrainTimeout))
	case err := <-srv.Err():
		log.Error("listener failed", zap.Error(err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	return srv.Shutdown(ctx)
}

func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("RGIT_LOG_LEVEL: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Encoding = "console"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return zc.Build()
}
