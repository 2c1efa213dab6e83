package s3store

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/rgit/rgit/storage/objstore"
)

var _ objstore.Stager = (*Store)(nil)

// Stage implements objstore.Stager. A body up to MaxSinglePut is sent
// whole, as one PutObject, at Commit (one request, as Put would); a larger
// one is a multipart upload whose parts are sent now, straight from r (no
// part is buffered), and completed at Commit. Any failure aborts the
// upload.
func (s *Store) Stage(ctx context.Context, key string, r io.ReaderAt, size int64) (objstore.Staged, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, fmt.Errorf("stage %q: %w", key, err)
	}
	if size <= s.maxSinglePut {
		return &stagedSingle{s: s, key: key, r: r, size: size}, nil
	}
	st, err := s.stageParts(ctx, k, r, size)
	if err != nil {
		return nil, fmt.Errorf("stage %q: %w", key, err)
	}
	return st, nil
}

// stageParts sends r in parts of at least partSize (more when 10,000
// parts would not hold size).
func (s *Store) stageParts(ctx context.Context, k string, r io.ReaderAt, size int64) (_ *stagedParts, err error) {
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &k})
	if err != nil {
		return nil, fmt.Errorf("create multipart upload: %w", mapErr(err))
	}
	st := &stagedParts{s: s, k: k, id: up.UploadId}
	defer func() {
		if err != nil {
			st.Abort(ctx)
		}
	}()
	partSize := max(s.partSize, minPartSize, (size+maxParts-1)/maxParts)
	for off, num := int64(0), int32(1); off < size; off, num = off+partSize, num+1 {
		n := min(partSize, size-off)
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:        &s.bucket,
			Key:           &k,
			UploadId:      up.UploadId,
			PartNumber:    aws.Int32(num),
			Body:          io.NewSectionReader(r, off, n),
			ContentLength: aws.Int64(n),
		})
		if err != nil {
			return nil, fmt.Errorf("upload part %d: %w", num, mapErr(err))
		}
		st.parts = append(st.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	}
	return st, nil
}

// stagedParts is a multipart upload whose parts are all sent.
type stagedParts struct {
	s     *Store
	k     string
	id    *string
	parts []types.CompletedPart
	done  bool // completed or aborted
}

func (st *stagedParts) Commit(ctx context.Context) error {
	if st.done {
		return fmt.Errorf("commit %q: upload already completed or aborted", st.k)
	}
	_, err := st.s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          &st.s.bucket,
		Key:             &st.k,
		UploadId:        st.id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: st.parts},
	})
	if err != nil {
		// Completion may or may not have taken effect; an abort after it
		// did is refused by the store and changes nothing.
		return fmt.Errorf("complete multipart upload %q: %w", st.k, mapErr(err))
	}
	st.done = true
	return nil
}

func (st *stagedParts) Abort(ctx context.Context) {
	if st.done {
		return
	}
	st.done = true
	st.s.abort(ctx, st.k, st.id)
}

// stagedSingle is a body small enough for one PutObject, sent at Commit.
type stagedSingle struct {
	s    *Store
	key  string
	r    io.ReaderAt
	size int64
}

func (st *stagedSingle) Commit(ctx context.Context) error {
	return st.s.Put(ctx, st.key, io.NewSectionReader(st.r, 0, st.size), st.size)
}

func (st *stagedSingle) Abort(context.Context) {}
