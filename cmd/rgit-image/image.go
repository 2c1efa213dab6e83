package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Where things are inside the image. The manifests in deploy/ and the
// Dockerfile use the same paths and user.
const (
	BinDir   = "/usr/local/bin"
	CacheDir = "/cache"
	UID      = 65532 // the conventional "nonroot" id of distroless images
	CAFile   = "/etc/ssl/certs/ca-certificates.crt"
)

// Ports the image exposes: git HTTP, git SSH, peer HTTP, peer stream, and
// the read API of `rgit api-serve`.
var Ports = []string{"8080/tcp", "2222/tcp", "8081/tcp", "8082/tcp", "8090/tcp"}

// Spec is what one image is built from.
type Spec struct {
	Binaries map[string]string // name in BinDir → path of a static binary on disk
	Version  string            // org.opencontainers.image.version
	Revision string            // org.opencontainers.image.revision (commit)
	Created  time.Time         // the commit's time, never the clock's: the digest must not depend on when it was built
	Arch     string            // GOARCH of the binaries
}

// Build assembles the image: one layer with the binaries, a CA bundle, a
// passwd/group naming the non-root user and the /cache volume. Every tar
// header carries Created as its time and fixed owners, and the CA bundle
// comes from a pinned Go module rather than the build host, so one commit
// gives one digest on any machine.
func Build(s Spec) (v1.Image, error) {
	layerTar, err := rootFS(s)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "rgit-image (make image)"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", s.Arch
	cf.Created = v1.Time{Time: s.Created}
	exposed := map[string]struct{}{}
	for _, p := range Ports {
		exposed[p] = struct{}{}
	}
	cf.Config = v1.Config{
		Entrypoint:   []string{path.Join(BinDir, "rgit")},
		Cmd:          []string{"serve"},
		User:         fmt.Sprintf("%d:%d", UID, UID),
		WorkingDir:   CacheDir,
		Env:          []string{"PATH=" + BinDir + ":/usr/bin:/bin", "RGIT_CACHE_DIR=" + CacheDir, "SSL_CERT_FILE=" + CAFile},
		ExposedPorts: exposed,
		Volumes:      map[string]struct{}{CacheDir: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "rgit",
			"org.opencontainers.image.version":  s.Version,
			"org.opencontainers.image.revision": s.Revision,
			"org.opencontainers.image.created":  s.Created.UTC().Format(time.RFC3339),
			"org.opencontainers.image.source":   "https://github.com/rgit/rgit",
		},
	}
	return mutate.ConfigFile(img, cf)
}

// rootFS is the layer's tar stream.
func rootFS(s Spec) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := func(name string, typ byte, mode int64, uid int, size int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: typ, Name: name, Mode: mode, Uid: uid, Gid: uid,
			Size: size, ModTime: s.Created, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := hdr(name, tar.TypeReg, mode, 0, int64(len(data))); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"etc/", "etc/ssl/", "etc/ssl/certs/", "usr/", "usr/local/", "usr/local/bin/"} {
		if err := hdr(d, tar.TypeDir, 0o755, 0, 0); err != nil {
			return nil, err
		}
	}
	// The working volume and /tmp belong to the user the node runs as.
	if err := hdr(CacheDir[1:]+"/", tar.TypeDir, 0o755, UID, 0); err != nil {
		return nil, err
	}
	if err := hdr("tmp/", tar.TypeDir, 0o1777, 0, 0); err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nrgit:x:%d:%d:rgit:%s:/sbin/nologin\n", UID, UID, CacheDir)
	group := fmt.Sprintf("root:x:0:\nrgit:x:%d:\n", UID)
	if err := file("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte(group)); err != nil {
		return nil, err
	}
	if err := file(CAFile[1:], 0o644, caBundle()); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(s.Binaries) {
		data, err := os.ReadFile(s.Binaries[name])
		if err != nil {
			return nil, err
		}
		if err := file(path.Join(BinDir[1:], name), 0o755, data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// caBundle is Mozilla's root set as x/crypto pins it, in PEM. Roots that
// carry a usage constraint are left out: a PEM file cannot express one.
func caBundle() []byte {
	var out bytes.Buffer
	for c := range bundle.Roots() {
		if c.Constraint != nil {
			continue
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate})
	}
	return out.Bytes()
}
