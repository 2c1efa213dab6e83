package s3store

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/rgit/rgit/storage/objstore"
)

var _ objstore.Presigner = (*Store)(nil)

// PresignGet implements objstore.Presigner with SigV4 query signing.
func (s *Store) PresignGet(ctx context.Context, key string, ttl time.Duration) (objstore.Presigned, error) {
	k, err := s.key(key)
	if err != nil {
		return objstore.Presigned{}, fmt.Errorf("presign get %q: %w", key, err)
	}
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &k}, s3.WithPresignExpires(ttl))
	if err != nil {
		return objstore.Presigned{}, fmt.Errorf("presign get %q: %w", key, err)
	}
	return presigned(req.Method, req.URL, req.SignedHeader, ttl), nil
}

// PresignPut implements objstore.Presigner: Content-Length and
// x-amz-checksum-sha256 are signed headers, so the store takes exactly
// size bytes, and stores that check checksums (S3, MinIO, versitygw)
// refuse a body with another SHA-256 (400 BadDigest) before the object
// exists.
func (s *Store) PresignPut(ctx context.Context, key string, size int64, sum [32]byte, ttl time.Duration) (objstore.Presigned, error) {
	k, err := s.key(key)
	if err != nil {
		return objstore.Presigned{}, fmt.Errorf("presign put %q: %w", key, err)
	}
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: &k, ContentLength: aws.Int64(size),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:]))}
	req, err := s.presign.PresignPutObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return objstore.Presigned{}, fmt.Errorf("presign put %q: %w", key, err)
	}
	return presigned(req.Method, req.URL, req.SignedHeader, ttl), nil
}

func presigned(method, url string, signed http.Header, ttl time.Duration) objstore.Presigned {
	p := objstore.Presigned{Method: method, URL: url, Header: map[string]string{}, Expires: time.Now().Add(ttl)}
	for name, v := range signed {
		if len(v) == 0 || http.CanonicalHeaderKey(name) == "Host" || http.CanonicalHeaderKey(name) == "Content-Length" {
			continue
		}
		p.Header[http.CanonicalHeaderKey(name)] = v[0]
	}
	return p
}

// HeadSHA256 implements objstore.Presigner with a HeadObject that asks for
// the object's checksums. A multipart object's SHA-256 is a checksum of
// its parts' checksums ("…-N"), not of its bytes: that is no SHA-256 of
// the object, so ok is false.
func (s *Store) HeadSHA256(ctx context.Context, key string) (objstore.ObjectInfo, [32]byte, bool, error) {
	var sum [32]byte
	k, err := s.key(key)
	if err != nil {
		return objstore.ObjectInfo{}, sum, false, fmt.Errorf("head %q: %w", key, err)
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &k, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return objstore.ObjectInfo{}, sum, false, fmt.Errorf("head %q: %w", key, mapErr(err))
	}
	info := objstore.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(out.ChecksumSHA256))
	if err != nil || len(raw) != len(sum) {
		return info, sum, false, nil
	}
	copy(sum[:], raw)
	return info, sum, true, nil
}
