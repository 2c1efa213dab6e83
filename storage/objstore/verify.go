package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
)

// ProbePrefix is the reserved key prefix of Verify's probe objects. Nothing
// else is stored under it; a probe left behind by a crash is harmless.
const ProbePrefix = "health/"

// VerifyError is Verify's failure: the step that failed and the store's
// error. Its message is short (the S3 error code and message, or the
// network error) because it goes into one start-up line and into /healthz.
type VerifyError struct {
	Step string // "create probe object under health/", "read back …", …
	Err  error
}

func (e *VerifyError) Error() string { return e.Step + ": " + Reason(e.Err) }
func (e *VerifyError) Unwrap() error { return e.Err }

// Verify checks, for real, that s does what rgit needs with the
// credentials, bucket and endpoint it was opened with: it creates a unique
// probe object under ProbePrefix with PutIfAbsent, reads it back, checks
// that a second PutIfAbsent of the key is refused with ErrExists (writer
// fencing rests on create-if-absent) and deletes the probe. A HEAD of a
// missing key proves none of this: S3 answers a bare 404 for a missing
// bucket too, and an unsigned or wrongly signed HEAD has no error body.
// Failures are *VerifyError.
func Verify(ctx context.Context, s Store) error {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	key := ProbePrefix + "probe-" + hex.EncodeToString(b[:])
	body := []byte("rgit store probe " + key)
	step, err := "create probe object", s.PutIfAbsent(ctx, key, bytes.NewReader(body), int64(len(body)))
	if err == nil {
		step, err = checkProbe(ctx, s, key, body)
		// Delete even when a check failed; a failed delete is the
		// reported error only when nothing failed before it.
		if derr := s.Delete(ctx, key); err == nil && derr != nil {
			step, err = "delete probe object", derr
		}
	}
	if err != nil {
		// The key is left out: it differs on every probe, and a repeated
		// failure should read the same (the health probe logs changes).
		return &VerifyError{Step: step + " under " + ProbePrefix, Err: err}
	}
	return nil
}

// checkProbe reads the probe back and tries to create it again; it returns
// the failed step and its error.
func checkProbe(ctx context.Context, s Store, key string, body []byte) (string, error) {
	const read = "read back probe object"
	rc, _, err := s.Get(ctx, key)
	if err != nil {
		return read, err
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return read, err
	}
	if !bytes.Equal(got, body) {
		return read, fmt.Errorf("got %d bytes that differ from the %d written", len(got), len(body))
	}
	err = s.PutIfAbsent(ctx, key, bytes.NewReader(body), int64(len(body)))
	if errors.Is(err, ErrExists) {
		return "", nil
	}
	if err == nil {
		err = errors.New("the store accepted it: it ignores If-None-Match, so writer fencing cannot work")
	}
	return "create-if-absent over the existing probe object", err
}

// Reason names what went wrong in a store error, briefly: the S3 error
// code and message (NoSuchBucket, AccessDenied, SignatureDoesNotMatch, …)
// when the server sent one, else the network error (connection refused),
// else the whole error.
func Reason(err error) string {
	// The AWS SDK's smithy.APIError, matched by its methods so that this
	// package need not import the SDK.
	var api interface {
		ErrorCode() string
		ErrorMessage() string
	}
	if errors.As(err, &api) && api.ErrorCode() != "" {
		if msg := api.ErrorMessage(); msg != "" {
			return api.ErrorCode() + ": " + msg
		}
		return api.ErrorCode()
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	return err.Error()
}

// Describer is implemented by stores that can say where their objects
// live (bucket and endpoint, directory), for operator messages.
type Describer interface {
	Describe() string
}

// Describe returns s's own description, or its type when it has none.
func Describe(s Store) string {
	if d, ok := s.(Describer); ok {
		return d.Describe()
	}
	return fmt.Sprintf("%T", s)
}
