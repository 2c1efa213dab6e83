// Package s3store is an objstore.Store over S3 or an S3-compatible server
// (aws-sdk-go-v2). It backs RGIT_STORE_URL=s3://bucket[/prefix].
//
// Create-if-absent is a conditional write (If-None-Match: *) on PutObject or
// on CompleteMultipartUpload; Copy is server-side. It is an
// objstore.Presigner: clients can be handed signed GET and PUT requests
// (presign.go). Large and unknown-size
// bodies are streamed as multipart uploads holding one part in memory.
//
// It imports the standard library, objstore, objstore/internal, the AWS SDK
// and zap only.
package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore"
)

// Defaults for the size thresholds in Config.
const (
	DefaultPartSize     = 16 << 20
	DefaultMaxSinglePut = 16 << 20
	DefaultMaxCopySize  = 5 << 30 // S3's CopyObject limit
	DefaultCopyPartSize = 512 << 20
	minPartSize         = 5 << 20 // S3's minimum for all parts but the last
	maxParts            = 10000
	defaultRegion       = "us-east-1"
	// writerMeta is user metadata naming the writer of a conditional put,
	// so a 412 caused by our own retried request is recognised as success.
	writerMeta = "rgit-writer"
	// Retries of one request (see New).
	maxAttempts = 3
	maxBackoff  = 2 * time.Second
)

// Config selects the bucket and how to reach it. Empty fields fall back to
// the AWS SDK's default chain (AWS_* environment, ~/.aws files).
type Config struct {
	Bucket string
	// Prefix is prepended to every key (a trailing '/' is added if missing)
	// and stripped from listed keys.
	Prefix string
	// Endpoint is a custom S3 endpoint URL; it implies path-style
	// addressing, which S3-compatible servers need.
	Endpoint string
	Region   string // default: SDK chain, then us-east-1
	Profile  string // shared config profile (~/.aws/credentials, config)
	// Static credentials; empty means the SDK's default chain.
	AccessKeyID, SecretAccessKey, SessionToken string

	Logger *zap.Logger

	// Tuning, zero means the default. Tests shrink these to exercise the
	// multipart paths with small objects.
	PartSize     int64 // multipart part size for unknown-size bodies
	MaxSinglePut int64 // largest known-size body sent as one PutObject
	MaxCopySize  int64 // largest object copied with one CopyObject
	CopyPartSize int64 // part size of a multipart copy
}

// ConfigFromEnv returns a Config for bucket and prefix with Endpoint,
// Region and Profile from AWS_ENDPOINT, AWS_REGION and AWS_PROFILE.
// Credentials come from the SDK chain (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, or the profile).
func ConfigFromEnv(bucket, prefix string) Config {
	return Config{
		Bucket:   bucket,
		Prefix:   prefix,
		Endpoint: os.Getenv("AWS_ENDPOINT"),
		Region:   os.Getenv("AWS_REGION"),
		Profile:  os.Getenv("AWS_PROFILE"),
	}
}

// Store is an S3-backed objstore.Store.
type Store struct {
	client  *s3.Client
	presign *s3.PresignClient
	bucket  string
	prefix  string
	log     *zap.Logger

	partSize, maxSinglePut, maxCopySize, copyPartSize int64
}

var _ objstore.Store = (*Store)(nil)

// New builds a store from cfg. It does not contact the server.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3 store: empty bucket name")
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(cfg.Profile))
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(
			cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 store %s: load AWS config: %w", cfg.Bucket, err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = defaultRegion
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		// Retries are bounded so an outage is not amplified: at most
		// three attempts per request, exponential backoff with full
		// jitter capped at maxBackoff (well inside a request's operation
		// deadline), and the client-wide retry budget (a token bucket,
		// refilled by successes) that stops retrying altogether while
		// most requests fail.
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = maxAttempts
			so.MaxBackoff = maxBackoff
		})
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		// Any custom endpoint (ours or endpoint_url from the profile) is an
		// S3-compatible server without virtual-host bucket DNS.
		if o.BaseEndpoint != nil {
			o.UsePathStyle = true
		}
	})
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Store{
		client:       client,
		presign:      s3.NewPresignClient(client),
		bucket:       cfg.Bucket,
		prefix:       prefix,
		log:          log,
		partSize:     orDefault(cfg.PartSize, DefaultPartSize),
		maxSinglePut: orDefault(cfg.MaxSinglePut, DefaultMaxSinglePut),
		maxCopySize:  orDefault(cfg.MaxCopySize, DefaultMaxCopySize),
		copyPartSize: orDefault(cfg.CopyPartSize, DefaultCopyPartSize),
	}, nil
}

func orDefault(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// Client returns the underlying S3 client (for test harnesses).
func (s *Store) Client() *s3.Client { return s.client }

// key validates key and returns the full S3 key.
func (s *Store) key(key string) (string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isNotFound(err error) bool {
	switch errorCode(err) {
	case "NoSuchKey", "NotFound":
		return true
	case "NoSuchBucket", "NoSuchUpload":
		return false
	}
	return httpStatus(err) == http.StatusNotFound
}

func isPreconditionFailed(err error) bool {
	return errorCode(err) == "PreconditionFailed" || httpStatus(err) == http.StatusPreconditionFailed
}

func isConditionalConflict(err error) bool {
	return errorCode(err) == "ConditionalRequestConflict" || httpStatus(err) == http.StatusConflict
}

// mapErr attaches the objstore sentinel an SDK error stands for.
func mapErr(err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%w: %w", objstore.ErrNotFound, err)
	}
	return err
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.ObjectInfo, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, objstore.ObjectInfo{}, fmt.Errorf("get %q: %w", key, err)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &k})
	if err != nil {
		return nil, objstore.ObjectInfo{}, fmt.Errorf("get %q: %w", key, mapErr(err))
	}
	return out.Body, objstore.ObjectInfo{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// GetRange implements objstore.Store with objstore.ClampRange semantics.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, fmt.Errorf("get range %q: %w", key, err)
	}
	if off < 0 {
		return nil, fmt.Errorf("get range %q: %w: offset %d", key, objstore.ErrInvalidRange, off)
	}
	if length == 0 {
		// HTTP cannot ask for zero bytes; only existence matters.
		if _, err := s.Head(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &k}
	if off > 0 || length > 0 {
		rng := fmt.Sprintf("bytes=%d-", off)
		if length > 0 {
			rng += fmt.Sprint(off + length - 1)
		}
		in.Range = &rng
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		// 416: the object exists but starts before off (or is empty).
		if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable || errorCode(err) == "InvalidRange" {
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, fmt.Errorf("get range %q: %w", key, mapErr(err))
	}
	return out.Body, nil
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	k, err := s.key(key)
	if err != nil {
		return objstore.ObjectInfo{}, fmt.Errorf("head %q: %w", key, err)
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &k})
	if err != nil {
		return objstore.ObjectInfo{}, fmt.Errorf("head %q: %w", key, mapErr(err))
	}
	return objstore.ObjectInfo{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// Delete implements objstore.Store. S3 deletes are idempotent already.
func (s *Store) Delete(ctx context.Context, key string) error {
	k, err := s.key(key)
	if err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &k}); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	return nil
}

// List implements objstore.Store with ListObjectsV2, one page per
// round trip, fetched as iteration proceeds.
func (s *Store) List(ctx context.Context, prefix, startAfter string) iter.Seq2[objstore.ObjectInfo, error] {
	return func(yield func(objstore.ObjectInfo, error) bool) {
		in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.prefix + prefix)}
		if startAfter != "" {
			in.StartAfter = aws.String(s.prefix + startAfter)
		}
		pages := s3.NewListObjectsV2Paginator(s.client, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				yield(objstore.ObjectInfo{}, fmt.Errorf("list %q: %w", prefix, err))
				return
			}
			for _, o := range page.Contents {
				key, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
				if !ok {
					continue // cannot happen: the server filtered by prefix
				}
				info := objstore.ObjectInfo{Key: key, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}
				if !yield(info, nil) {
					return
				}
			}
		}
	}
}

// newWriterToken returns a random token identifying one conditional write.
func newWriterToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// condAction is what to do after a conditional write failed.
type condAction int

const (
	condFail   condAction = iota // return the write error
	condWon                      // the object is ours: success
	condExists                   // someone else's object: ErrExists
	condRetry                    // retry the write after a backoff
)

// decideConditional is the pure decision behind conditional. writeErr is
// the failed write's error; headErr and headToken are the outcome of the
// HeadObject that followed it (headToken is the object's writer token).
//   - 412 Precondition Failed means the key exists: ErrExists, unless the
//     object carries our own token (the SDK retried a request that had in
//     fact succeeded, and the retry hit our own object), or unless the
//     object is gone again by the time we look (retry: the key is free).
//   - 409 ConditionalRequestConflict means another conditional write on the
//     key is in flight: ErrExists once the object is seen to exist,
//     otherwise retry.
func decideConditional(writeErr, headErr error, headToken, token string) condAction {
	if !isPreconditionFailed(writeErr) && !isConditionalConflict(writeErr) {
		return condFail
	}
	switch {
	case headErr == nil && headToken == token:
		return condWon
	case headErr == nil:
		return condExists
	case isNotFound(headErr):
		return condRetry
	}
	return condFail
}

// conditional runs a create-if-absent request (do) for key k written with
// token, acting on decideConditional after each failure.
func (s *Store) conditional(ctx context.Context, k, token string, do func() error) error {
	const maxAttempts = 6
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := do()
		if err == nil {
			return nil
		}
		if !isPreconditionFailed(err) && !isConditionalConflict(err) {
			return mapErr(err)
		}
		var headToken string
		head, headErr := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &k})
		if headErr == nil {
			headToken = head.Metadata[writerMeta]
		}
		switch decideConditional(err, headErr, headToken, token) {
		case condWon:
			return nil
		case condExists:
			return fmt.Errorf("%w: %w", objstore.ErrExists, err)
		case condFail:
			return fmt.Errorf("%w (and head after it: %w)", err, headErr)
		}
		if attempt == maxAttempts {
			return fmt.Errorf("conditional write still conflicting after %d attempts: %w", attempt, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// Describe implements objstore.Describer: bucket, prefix and the endpoint
// requests go to, the three things to check when the store fails.
func (s *Store) Describe() string {
	o := s.client.Options()
	endpoint := "AWS S3 (region " + o.Region + ")"
	if o.BaseEndpoint != nil {
		endpoint = *o.BaseEndpoint
	}
	return fmt.Sprintf("bucket %q (s3://%s/%s) at %s", s.bucket, s.bucket, s.prefix, endpoint)
}
