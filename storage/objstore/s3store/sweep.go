package s3store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/rgit/rgit/storage/objstore"
)

var _ objstore.UploadSweeper = (*Store)(nil)

// SweepUploads implements objstore.UploadSweeper: it lists the multipart
// uploads under prefix (ListMultipartUploads, page by page), then aborts
// each one initiated before cutoff. The listing ends before the first
// abort: a server may refuse a page whose upload-id marker names an
// upload that is gone.
func (s *Store) SweepUploads(ctx context.Context, prefix string, cutoff time.Time) (int, error) {
	var stale []types.MultipartUpload
	in := &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: aws.String(s.prefix + prefix)}
	for {
		page, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil && in.UploadIdMarker != nil && errorCode(err) == "InvalidArgument" {
			// A server may refuse a marker naming an upload its writer
			// finished since the last page, and versitygw refuses every
			// one, its own included (versity/versitygw#2149): resume
			// after the key instead, leaving that key's further uploads
			// to a later sweep.
			in.UploadIdMarker = nil
			page, err = s.client.ListMultipartUploads(ctx, in)
		}
		if err != nil {
			return 0, fmt.Errorf("sweep uploads under %q: list: %w", prefix, err)
		}
		for _, u := range page.Uploads {
			// One of unknown age may be a live writer's: it stays.
			if u.Initiated != nil && u.Initiated.Before(cutoff) {
				stale = append(stale, u)
			}
		}
		if !aws.ToBool(page.IsTruncated) || aws.ToString(page.NextKeyMarker) == "" {
			break
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
	aborted := 0
	for _, u := range stale {
		_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: u.Key, UploadId: u.UploadId})
		switch {
		case errorCode(err) == "NoSuchUpload":
			// Completed or aborted since the listing.
		case err != nil:
			return aborted, fmt.Errorf("sweep uploads under %q: abort %s: %w", prefix, aws.ToString(u.Key), err)
		default:
			aborted++
		}
	}
	return aborted, nil
}
