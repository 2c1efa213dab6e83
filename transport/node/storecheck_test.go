package node_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/zap"

	"github.com/rgit/rgit/storage/objstore/s3store"
	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/testkit/s3local"
	"github.com/rgit/rgit/transport/node"
	"github.com/rgit/rgit/transport/node/config"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestStartRefusesBrokenStore: a node whose object store cannot be used
// does not start. Opening an S3 store contacts nothing, so before the
// start-up check a missing bucket, a wrong key or a dead endpoint all gave
// "rgit serving" and a 200 /healthz. Now Start fails with an error naming
// the bucket, the endpoint and the store's own error.
func TestStartRefusesBrokenStore(t *testing.T) {
	srv := s3local.Start(t)
	down := "http://" + closedAddr(t)
	cases := []struct {
		name, bucket string
		env          map[string]string // over srv.Env()
		endpoint     string            // named in the error
		want         string
	}{
		{"missing bucket", "nosuchbucket", nil, srv.Endpoint, "NoSuchBucket"},
		{"wrong secret key", srv.Bucket, map[string]string{"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, srv.Endpoint, "SignatureDoesNotMatch"},
		{"endpoint down", srv.Bucket, map[string]string{"AWS_ENDPOINT": down}, down, "connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, kv := range srv.Env() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			dir := t.TempDir()
			cfg, err := config.Parse(func(k string) string {
				return map[string]string{
					"RGIT_STORE_URL": "s3://" + c.bucket + "/t",
					"RGIT_CACHE_DIR": dir,
					"RGIT_HOST_KEY":  filepath.Join(dir, "host_key"),
					"RGIT_HTTP_ADDR": "127.0.0.1:0",
					"RGIT_SSH_ADDR":  "127.0.0.1:0",
				}[k]
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			s, err := node.Start(ctx, cfg, zap.NewNop())
			if err == nil {
				s.Shutdown(ctx)
				t.Fatal("Start succeeded on a broken store")
			}
			for _, w := range []string{`"` + c.bucket + `"`, c.endpoint, c.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("start error does not name %s:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("start error spans lines:\n%v", err)
			}
		})
	}
}

// waitHealth polls /healthz until it answers code with a body containing
// want, or fails the test after a deadline.
func waitHealth(t *testing.T, url string, code int, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var gotCode int
	var body string
	for time.Now().Before(deadline) {
		if gotCode, body = get(t, url); gotCode == code && strings.Contains(body, want) {
			return body
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a wait for an event
	}
	t.Fatalf("/healthz still %d %q after 30s, want %d with %q", gotCode, body, code, want)
	return ""
}

// TestHealthzProbesTheStore: /healthz re-runs the store check on its
// interval. Before, it only HEADed a key, and S3 answers a missing bucket's
// HEAD with a bare 404 that read as "key not found, store fine". With the
// bucket deleted under a running node it names NoSuchBucket, still
// answering 200 (liveness: a restart cannot bring the bucket back); once
// the bucket is back, the store is healthy again.
func TestHealthzProbesTheStore(t *testing.T) {
	s3srv := s3local.Start(t)
	st, err := s3store.New(t.Context(), s3srv.Config(""))
	if err != nil {
		t.Fatal(err)
	}
	const bucket = "health-check"
	client := st.Client()
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: ptr(bucket)}); err != nil {
		t.Fatal(err)
	}
	srv := gitenv.StartServerOpts(t, gitenv.Store{Name: "s3", URL: "s3://" + bucket + "/p", Env: s3srv.Env()},
		[]node.Option{node.WithStoreProbeInterval(50 * time.Millisecond)})
	url := "http://" + srv.HTTPAddr + "/healthz"
	waitHealth(t, url, http.StatusOK, "ok")

	// The bucket disappears under the node: empty it (the node's data,
	// and a probe object that may come and go), then delete it; retry
	// until no probe lands in between.
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: ptr(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Contents {
			if _, err := client.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: ptr(bucket), Key: o.Key}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = client.DeleteBucket(t.Context(), &s3.DeleteBucketInput{Bucket: ptr(bucket)})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delete bucket: %v", err)
		}
	}
	body := waitHealth(t, url, http.StatusOK, "NoSuchBucket")
	if !strings.Contains(body, `"`+bucket+`"`) || !strings.Contains(body, s3srv.Endpoint) {
		t.Errorf("body does not name the bucket and endpoint: %q", body)
	}

	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: ptr(bucket)}); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, url, http.StatusOK, "store healthy")
}

func ptr(s string) *string { return &s }
