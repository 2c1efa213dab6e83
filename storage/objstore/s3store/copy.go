package s3store

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Copy implements objstore.Store server-side: CopyObject, or a multipart
// UploadPartCopy for objects over MaxCopySize (5 GiB on S3).
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	if err := s.copy(ctx, src, dst); err != nil {
		return fmt.Errorf("copy %q to %q: %w", src, dst, err)
	}
	return nil
}

func (s *Store) copy(ctx context.Context, src, dst string) error {
	srcKey, err := s.key(src)
	if err != nil {
		return err
	}
	dstKey, err := s.key(dst)
	if err != nil {
		return err
	}
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &srcKey})
	if err != nil {
		return mapErr(err)
	}
	source := copySource(s.bucket, srcKey)
	if size := aws.ToInt64(head.ContentLength); size > s.maxCopySize {
		return s.copyMultipart(ctx, source, dstKey, size)
	}
	_, err = s.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: &dstKey, CopySource: &source})
	return mapErr(err)
}

func (s *Store) copyMultipart(ctx context.Context, source, dstKey string, size int64) (err error) {
	partSize := max(s.copyPartSize, minPartSize, (size+maxParts-1)/maxParts)
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &dstKey})
	if err != nil {
		return fmt.Errorf("create multipart upload: %w", mapErr(err))
	}
	defer func() {
		if err != nil {
			s.abort(ctx, dstKey, up.UploadId)
		}
	}()
	var parts []types.CompletedPart
	for off, num := int64(0), int32(1); off < size; off, num = off+partSize, num+1 {
		end := min(off+partSize, size) - 1
		out, err := s.client.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
			Bucket:          &s.bucket,
			Key:             &dstKey,
			UploadId:        up.UploadId,
			PartNumber:      aws.Int32(num),
			CopySource:      &source,
			CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", off, end)),
		})
		if err != nil {
			return fmt.Errorf("copy part %d: %w", num, mapErr(err))
		}
		if out.CopyPartResult == nil {
			return fmt.Errorf("copy part %d: response has no CopyPartResult", num)
		}
		parts = append(parts, types.CompletedPart{ETag: out.CopyPartResult.ETag, PartNumber: aws.Int32(num)})
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          &s.bucket,
		Key:             &dstKey,
		UploadId:        up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return fmt.Errorf("complete multipart copy: %w", mapErr(err))
	}
	return nil
}

// copySource is the x-amz-copy-source value "bucket/key", percent-encoded
// except for unreserved characters and '/'. '+' must be encoded: servers
// may decode it as a space.
func copySource(bucket, key string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for _, c := range []byte(bucket + "/" + key) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
