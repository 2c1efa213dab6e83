package main

import (
	"archive/tar"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/rgit/rgit/testkit/need"
)

const testVersion = "v9.9.9-imagetest"

// buildBinaries compiles static rgit and rgit-admin into dir the way
// `make image` does.
func buildBinaries(t *testing.T, dir string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	ld := "-X github.com/rgit/rgit/transport/node/version.version=" + testVersion +
		" -X github.com/rgit/rgit/transport/node/version.commit=0123456789abcdef -X github.com/rgit/rgit/transport/node/version.date=2026-01-02T03:04:05Z"
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ld, "-o", dir+"/", "./cmd/rgit", "./cmd/rgit-admin")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

func spec(dir string) Spec {
	return Spec{Version: testVersion, Revision: "0123456789abcdef", Arch: runtime.GOARCH,
		Created:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Binaries: map[string]string{"rgit": filepath.Join(dir, "rgit"), "rgit-admin": filepath.Join(dir, "rgit-admin")}}
}

// TestImage builds the image twice from two separate builds of the
// binaries (same digest: reproducible), writes and reloads the tarball,
// checks the config, and runs the rgit binary extracted from the layer.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries twice")
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	buildBinaries(t, dirA)
	buildBinaries(t, dirB)
	imgA, err := Build(spec(dirA))
	if err != nil {
		t.Fatal(err)
	}
	imgB, err := Build(spec(dirB))
	if err != nil {
		t.Fatal(err)
	}
	dA, _ := imgA.Digest()
	dB, _ := imgB.Digest()
	if dA != dB {
		t.Fatalf("two builds of one commit: digests %s and %s differ", dA, dB)
	}
	t.Logf("image digest %s (both builds)", dA)

	outDir := t.TempDir()
	out := filepath.Join(outDir, "rgit.tar")
	if err := run(dirA, testVersion, "0123456789abcdef", "2026-01-02T03:04:05Z", runtime.GOARCH, "rgit:test", out, filepath.Join(outDir, "oci"), ""); err != nil {
		t.Fatal(err)
	}
	img := reload(t, out, dA)
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want OCI", mt)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/rgit"}) || !slices.Equal(c.Cmd, []string{"serve"}) {
		t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want non-root 65532:65532", c.User)
	}
	for _, p := range []string{"8080/tcp", "2222/tcp", "8081/tcp", "8082/tcp", "8090/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed", p)
		}
	}
	if _, ok := c.Volumes["/cache"]; !ok || c.WorkingDir != "/cache" {
		t.Errorf("volumes %v workdir %q, want /cache", c.Volumes, c.WorkingDir)
	}
	if c.Labels["org.opencontainers.image.version"] != testVersion || c.Labels["org.opencontainers.image.revision"] != "0123456789abcdef" {
		t.Errorf("labels %v", c.Labels)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}

	files := extract(t, img)
	for _, want := range []string{"etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", "usr/local/bin/rgit", "usr/local/bin/rgit-admin", "cache"} {
		if _, ok := files[want]; !ok {
			t.Errorf("image lacks %s", want)
		}
	}
	if h := files["cache"]; h != nil && h.Uid != 65532 {
		t.Errorf("/cache owned by %d, want 65532", h.Uid)
	}
	if n := strings.Count(string(files["etc/ssl/certs/ca-certificates.crt"].data), "BEGIN CERTIFICATE"); n < 100 {
		t.Errorf("CA bundle holds %d certificates", n)
	}
	bin := filepath.Join(t.TempDir(), "rgit")
	if err := os.WriteFile(bin, files["usr/local/bin/rgit"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	assertStatic(t, bin)
	got, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), testVersion) {
		t.Fatalf("rgit version from the image: %v: %s", err, got)
	}

	// containers/image (podman load, skopeo) reads the tarball both as an
	// OCI archive, with the built digest, and as a docker-load archive.
	need.Tool(t, "skopeo")
	for transport, wantDigest := range map[string]bool{"oci-archive:": true, "docker-archive:": false, "oci:": true} {
		ref := transport + out
		if transport == "oci:" {
			ref = transport + filepath.Join(outDir, "oci")
		}
		got, err := exec.Command("skopeo", "inspect", "--format", "{{.Digest}} {{.Architecture}}", ref).CombinedOutput()
		if err != nil || !strings.Contains(string(got), runtime.GOARCH) {
			t.Errorf("skopeo inspect %s: %v: %s", ref, err, got)
		} else if wantDigest && !strings.HasPrefix(string(got), dA.String()) {
			t.Errorf("skopeo inspect %s: digest %s, built %s", ref, got, dA)
		}
	}

	// podman load takes the tarball as it is (no daemon needed; running a
	// container is not possible in this sandbox, so the binary ran above
	// from the extracted layer) and keeps its entrypoint, user and volume.
	need.Tool(t, "podman")
	got, err = exec.Command("podman", "load", "-i", out).CombinedOutput()
	m := regexp.MustCompile(`Loaded image(?:\(s\))?: (\S+)`).FindSubmatch(got)
	if err != nil || m == nil {
		t.Fatalf("podman load: %v: %s", err, got)
	}
	ref := string(m[1])
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", ref).Run() })
	cfg := strings.TrimSpace(string(mustOutput(t, "podman", "image", "inspect", ref, "--format", "{{.Config.User}} {{.Config.Entrypoint}} {{.Config.WorkingDir}}")))
	if cfg != "65532:65532 [/usr/local/bin/rgit] /cache" {
		t.Errorf("podman sees user, entrypoint and workdir %q", cfg)
	}
}

// mustOutput runs a command and returns its standard output.
func mustOutput(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}

// reload unpacks the archive at path and returns the image with digest
// want from its OCI layout, after checking that docker load's
// manifest.json names the same config and layers.
func reload(t *testing.T, path string, want v1.Hash) v1.Image {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("archive is not an OCI layout: %v", err)
	}
	img, err := idx.Image(want)
	if err != nil {
		t.Fatalf("OCI layout lacks the built digest %s: %v", want, err)
	}
	var dm []dockerManifest
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil || json.Unmarshal(b, &dm) != nil || len(dm) != 1 {
		t.Fatalf("manifest.json for docker load: %v %s", err, b)
	}
	cfgName, _ := img.ConfigName()
	if dm[0].Config != "blobs/sha256/"+cfgName.Hex || len(dm[0].Layers) != 1 || !slices.Equal(dm[0].RepoTags, []string{"rgit:test"}) {
		t.Errorf("manifest.json %+v does not match the image (config %s)", dm[0], cfgName)
	}
	for _, l := range append([]string{dm[0].Config}, dm[0].Layers...) {
		if _, err := os.Stat(filepath.Join(dir, l)); err != nil {
			t.Errorf("manifest.json names a missing blob: %v", err)
		}
	}
	return img
}

type entry struct {
	*tar.Header
	data []byte
}

func extract(t *testing.T, img v1.Image) map[string]*entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]*entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = &entry{h, b}
	}
}

// assertStatic fails unless bin is a statically linked ELF (no
// interpreter): the image has no libc.
func assertStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s is dynamically linked", bin)
		}
	}
}

func TestPin(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	in := "spec:\n  containers:\n    - name: rgit\n      image: rgit:latest # pin a digest\n    - image: other:1\n"
	out, err := Pin([]byte(in), "ghcr.io/rgit/rgit@"+digest)
	if err != nil {
		t.Fatal(err)
	}
	want := "spec:\n  containers:\n    - name: rgit\n      image: ghcr.io/rgit/rgit@" + digest + " # pin a digest\n    - image: ghcr.io/rgit/rgit@" + digest + "\n"
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	for _, bad := range []string{"rgit:latest", "rgit", ""} {
		if _, err := Pin([]byte(in), bad); err == nil {
			t.Errorf("Pin(%q) accepted a reference without a digest", bad)
		}
	}
	if _, err := Pin([]byte("kind: Service\n"), "rgit@"+digest); err == nil {
		t.Error("Pin accepted a manifest with no image line")
	}
}
