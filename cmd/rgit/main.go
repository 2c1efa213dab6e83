// Command rgit is the rgit server. `rgit serve` runs a node configured by
// RGIT_* environment variables (see README.md), `rgit api-serve` the
// read-API tier in front of a cluster; `rgit version` says which
// build this is.
//
// Exit codes: 0 after a clean drain; 2 for bad usage, bad configuration
// and anything that stops the node from starting (one line on stderr, no
// stack trace: those are for bugs); 1 when a running node fails.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/node/config"
	"github.com/rgit/rgit/transport/node/version"
)

func main() {
	cmd := ""
	if len(os.Args) >= 2 {
		cmd = os.Args[1]
	}
	switch cmd {
	case "serve", "api-serve":
	case "version", "--version", "-version", "-v":
		fmt.Println("rgit", version.Get())
		return
	default:
		usage(os.Stderr)
		os.Exit(2)
	}
	cfg, err := config.FromEnv()
	if err != nil {
		fatal("bad configuration: " + err.Error())
	}
	log, err := newLogger(cfg, isTerminal(os.Stderr))
	if err != nil {
		fatal(err.Error())
	}
	defer log.Sync()
	if cmd == "api-serve" {
		os.Exit(runAPI(cfg, log))
	}
	os.Exit(run(cfg, log))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: rgit serve | rgit api-serve | rgit version (-v, --version)\n\nConfiguration is read from the environment:")
	for _, v := range config.Vars {
		fmt.Fprintf(w, "  %-24s %s (default %q)\n", v.Name, v.Help, v.Default)
	}
}

// fatal reports a configuration or start-up error as one line and exits 2.
// Joined errors (several bad variables) are put on that one line too.
func fatal(msg string) {
	fmt.Fprintln(os.Stderr, "rgit: "+strings.ReplaceAll(strings.TrimSpace(msg), "\n", "; "))
	os.Exit(2)
}

func run(cfg *config.Config, log *zap.Logger) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	srv, err := node.Start(context.Background(), cfg, log)
	if err != nil {
		log.Sync()
		fatal(err.Error())
	}
	select {
	case s := <-sig:
		log.Info("signal received; draining", zap.String("signal", s.String()), zap.Duration("deadline", cfg.DrainTimeout))
	case err := <-srv.Err():
		log.Error("listener failed", zap.Error(err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Error("rgit stopped", zap.Error(err))
		return 1
	}
	return 0
}

// runAPI runs `rgit api-serve` until a signal, then drains.
func runAPI(cfg *config.Config, log *zap.Logger) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	srv, err := node.StartAPI(context.Background(), cfg, log)
	if err != nil {
		log.Sync()
		fatal(err.Error())
	}
	select {
	case s := <-sig:
		log.Info("signal received; draining", zap.String("signal", s.String()))
	case err := <-srv.Err():
		log.Error("listener failed", zap.Error(err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Error("rgit api-serve stopped", zap.Error(err))
		return 1
	}
	return 0
}

// newLogger writes to stderr in the encoding RGIT_LOG_FORMAT selects.
// Stack traces are off: an error log is an operational event, not a bug
// (panics still print theirs).
func newLogger(cfg *config.Config, terminal bool) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("RGIT_LOG_LEVEL: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Encoding = config.LogEncoding(cfg.LogFormat, terminal)
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	zc.DisableStacktrace = true
	return zc.Build()
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
