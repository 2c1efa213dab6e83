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
	name, start := "rgit", func(ctx context.Context) (server, error) { return node.Start(ctx, cfg, log) }
	if cmd == "api-serve" {
		name, start = "rgit api-serve", func(ctx context.Context) (server, error) { return node.StartAPI(ctx, cfg, log) }
	}
	os.Exit(run(name, cfg, log, start))
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

// server is a started node or api-serve.
type server interface {
	Err() <-chan error
	Shutdown(context.Context) error
}

// run starts a server and runs it until a signal or a failed listener,
// then drains it within RGIT_DRAIN_SECS.
func run(name string, cfg *config.Config, log *zap.Logger, start func(context.Context) (server, error)) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	srv, err := start(context.Background())
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
		log.Error(name+" stopped", zap.Error(err))
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
