package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore/internal/ctxio"
)

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.put(ctx, key, r, size, false); err != nil {
		return fmt.Errorf("put %q: %w", key, err)
	}
	return nil
}

// PutIfAbsent implements objstore.Store with If-None-Match: *.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := s.put(ctx, key, r, size, true); err != nil {
		return fmt.Errorf("put if absent %q: %w", key, err)
	}
	return nil
}

// put sends a known-size body up to maxSinglePut, or an unknown-size body
// that turns out to fit in one part, as one PutObject; anything else as a
// multipart upload.
func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64, ifAbsent bool) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r = ctxio.Reader(ctx, r)
	if size >= 0 && size <= s.maxSinglePut {
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return bodyErr(err, size)
		}
		if err := checkNoMore(r, size); err != nil {
			return err
		}
		return s.putSingle(ctx, k, buf, ifAbsent)
	}
	partSize := s.partSize
	if size >= 0 {
		partSize = max(partSize, (size+maxParts-1)/maxParts)
	}
	buf := make([]byte, partSize)
	n, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("read body: %w", err)
	}
	if size < 0 && err != nil {
		return s.putSingle(ctx, k, buf[:n], ifAbsent)
	}
	return s.putMultipart(ctx, k, r, buf, n, err != nil, size, ifAbsent)
}

func bodyErr(err error, size int64) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("body is shorter than the %d bytes the caller said", size)
	}
	return fmt.Errorf("read body: %w", err)
}

// checkNoMore reads past the size the caller gave: the body must end
// there, and a reader that fails at its end (one that checked the body as
// it streamed) fails the write.
func checkNoMore(r io.Reader, size int64) error {
	var b [1]byte
	n, err := io.ReadFull(r, b[:])
	switch {
	case n > 0:
		return fmt.Errorf("body is longer than the %d bytes the caller said", size)
	case err != nil && !errors.Is(err, io.EOF):
		return fmt.Errorf("read body: %w", err)
	}
	return nil
}

func (s *Store) putSingle(ctx context.Context, k string, data []byte, ifAbsent bool) error {
	in := &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &k,
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	if !ifAbsent {
		_, err := s.client.PutObject(ctx, in)
		return mapErr(err)
	}
	token := newWriterToken()
	in.IfNoneMatch = aws.String("*")
	in.Metadata = map[string]string{writerMeta: token}
	return s.conditional(ctx, k, token, func() error {
		in.Body = bytes.NewReader(data)
		_, err := s.client.PutObject(ctx, in)
		return err
	})
}

// putMultipart uploads buf[:n] and the rest of r in parts of len(buf),
// reusing buf, and completes the upload (conditionally when ifAbsent). Any
// failure aborts the upload so no parts are left behind.
func (s *Store) putMultipart(ctx context.Context, k string, r io.Reader, buf []byte, n int, eof bool, size int64, ifAbsent bool) (err error) {
	create := &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &k}
	var token string
	if ifAbsent {
		token = newWriterToken()
		create.Metadata = map[string]string{writerMeta: token}
	}
	up, err := s.client.CreateMultipartUpload(ctx, create)
	if err != nil {
		return fmt.Errorf("create multipart upload: %w", mapErr(err))
	}
	defer func() {
		if err != nil {
			s.abort(ctx, k, up.UploadId)
		}
	}()

	var parts []types.CompletedPart
	var total int64
	for num := int32(1); ; num++ {
		if num > maxParts {
			return fmt.Errorf("body exceeds %d parts of %d bytes", maxParts, len(buf))
		}
		total += int64(n)
		if size >= 0 && total > size {
			return fmt.Errorf("body is longer than the %d bytes the caller said", size)
		}
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:        &s.bucket,
			Key:           &k,
			UploadId:      up.UploadId,
			PartNumber:    aws.Int32(num),
			Body:          bytes.NewReader(buf[:n]),
			ContentLength: aws.Int64(int64(n)),
		})
		if err != nil {
			return fmt.Errorf("upload part %d: %w", num, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		if eof {
			break
		}
		var rerr error
		n, rerr = io.ReadFull(r, buf)
		switch {
		case errors.Is(rerr, io.EOF):
			eof = true
		case errors.Is(rerr, io.ErrUnexpectedEOF):
			eof = true
		case rerr != nil:
			return fmt.Errorf("read body: %w", rerr)
		}
		if n == 0 {
			break // the previous part was the last
		}
	}
	if size >= 0 && total != size {
		return fmt.Errorf("body is %d bytes, caller said %d", total, size)
	}

	complete := &s3.CompleteMultipartUploadInput{
		Bucket:          &s.bucket,
		Key:             &k,
		UploadId:        up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if !ifAbsent {
		if _, err := s.client.CompleteMultipartUpload(ctx, complete); err != nil {
			return fmt.Errorf("complete multipart upload: %w", mapErr(err))
		}
		return nil
	}
	complete.IfNoneMatch = aws.String("*")
	return s.conditional(ctx, k, token, func() error {
		_, err := s.client.CompleteMultipartUpload(ctx, complete)
		return err
	})
}

// abort cancels a multipart upload. It runs even when ctx is already done
// (that is often why we abort), under its own short deadline.
func (s *Store) abort(ctx context.Context, k string, uploadID *string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &k, UploadId: uploadID})
	if err != nil {
		s.log.Warn("abort multipart upload failed; parts stay until garbage collection (a day on) or a bucket lifecycle rule removes them",
			zap.String("bucket", s.bucket), zap.String("key", k), zap.Error(err))
	}
}
