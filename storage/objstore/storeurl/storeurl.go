// Package storeurl opens an objstore.Store from a store URL
// (RGIT_STORE_URL):
//
//	file:///abs/dir    a directory (filestore)
//	file://./rel/dir   a directory relative to the working directory; the
//	                   embedded default is file://./data
//	mem://             memory (memstore); nothing persists
//	s3://bucket[/pfx]  S3 or compatible (s3store); AWS_* environment
//
// It lives apart from objstore because it imports the backends, which
// import objstore. It imports objstore, its backends and zap.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore"
	"github.com/rgit/rgit/storage/objstore/filestore"
	"github.com/rgit/rgit/storage/objstore/memstore"
	"github.com/rgit/rgit/storage/objstore/s3store"
)

// ErrBadURL: the store URL cannot be opened as written.
var ErrBadURL = errors.New("bad store URL")

// Options tune Open.
type Options struct {
	// Timeout bounds every store request (objstore.WithTimeout); 0 means
	// none. Callers apply RGIT_STORE_TIMEOUT_SECS (default 900) here.
	Timeout time.Duration
	// Logger receives warnings; nil discards them.
	Logger *zap.Logger
}

// Open opens the store rawURL names.
func Open(ctx context.Context, rawURL string, opts Options) (objstore.Store, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s, err := open(ctx, rawURL, log)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", rawURL, err)
	}
	return objstore.WithTimeout(s, opts.Timeout), nil
}

func open(ctx context.Context, rawURL string, log *zap.Logger) (objstore.Store, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("%w: want file:///dir, file://./dir, mem:// or s3://bucket[/prefix]", ErrBadURL)
	}
	switch scheme {
	case "file":
		dir, err := filePath(rest)
		if err != nil {
			return nil, err
		}
		return filestore.New(dir)
	case "mem":
		if rest != "" {
			return nil, fmt.Errorf("%w: mem:// takes nothing after the scheme", ErrBadURL)
		}
		log.Warn("USING AN IN-MEMORY OBJECT STORE (mem://): NOTHING PERSISTS; every repository, ref and pack is lost when this process exits")
		return memstore.New(), nil
	case "s3":
		bucket, prefix, err := s3Location(rawURL)
		if err != nil {
			return nil, err
		}
		cfg := s3store.ConfigFromEnv(bucket, prefix)
		cfg.Logger = log
		return s3store.New(ctx, cfg)
	default:
		return nil, fmt.Errorf("%w: unknown scheme %q (want file, mem or s3)", ErrBadURL, scheme)
	}
}

// filePath turns what follows "file://" into a directory: "/abs" or
// "./rel". Anything else ("file://host/x", "file://rel") is ambiguous and
// refused rather than guessed at.
func filePath(rest string) (string, error) {
	switch {
	case strings.HasPrefix(rest, "/"), rest == ".", strings.HasPrefix(rest, "./"):
		return rest, nil
	case rest == "":
		return "", fmt.Errorf("%w: file:// needs a directory (file:///abs/dir or file://./rel/dir)", ErrBadURL)
	default:
		return "", fmt.Errorf("%w: write file:///abs/dir or file://./rel/dir, not file://%s", ErrBadURL, rest)
	}
}

func s3Location(rawURL string) (bucket, prefix string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	switch {
	case u.Host == "":
		return "", "", fmt.Errorf("%w: s3:// needs a bucket (s3://bucket[/prefix])", ErrBadURL)
	case u.User != nil || u.Port() != "":
		return "", "", fmt.Errorf("%w: credentials and endpoints come from AWS_* variables, not the URL", ErrBadURL)
	case u.RawQuery != "" || u.Fragment != "":
		return "", "", fmt.Errorf("%w: s3 URLs take no query or fragment", ErrBadURL)
	}
	prefix = strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := objstore.ValidateKey(prefix); err != nil {
			return "", "", fmt.Errorf("%w: prefix: %w", ErrBadURL, err)
		}
	}
	return u.Host, prefix, nil
}
