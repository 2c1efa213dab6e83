// Command rgit-image builds rgit's container image without a Docker daemon
// or a base image (go-containerregistry, as ko and crane do): `make image`
// builds static binaries and runs it. It writes a tarball that `docker
// load`, `podman load` and `crane push` accept (an OCI image layout, plus
// the manifest.json that docker load reads, as `docker save` writes since
// Docker 25), and the image digest to a file that `make manifests` pins
// into deploy/. An OCI layout keeps the manifest byte for byte, so the
// digest pushed is the digest pinned; a docker-save tarball would not.
//
//	rgit-image -bin DIR -version V -revision SHA -created RFC3339 -tag rgit:V -o rgit.tar -digest-file rgit.digest
//	rgit-image pin -image REPO@sha256:… deploy/rgit.yaml deploy/api.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "pin" {
		if err := pinMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "rgit-image pin:", err)
			os.Exit(1)
		}
		return
	}
	bin := flag.String("bin", "bin", "directory holding the static rgit and rgit-admin binaries")
	ver := flag.String("version", "devel", "image version label")
	rev := flag.String("revision", "unknown", "commit the image is built from")
	created := flag.String("created", "1970-01-01T00:00:00Z", "commit time (RFC 3339); also every file's time in the image")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH of the binaries")
	tag := flag.String("tag", "rgit:devel", "tag recorded in the tarball (docker load names the image so)")
	out := flag.String("o", "bin/rgit-image.tar", "output tarball (OCI layout + docker manifest.json)")
	layoutDir := flag.String("layout", "bin/rgit-oci", "output OCI layout directory (crane push it to keep the digest)")
	digestFile := flag.String("digest-file", "", "also write the image digest (sha256:…) here")
	flag.Parse()
	if err := run(*bin, *ver, *rev, *created, *arch, *tag, *out, *layoutDir, *digestFile); err != nil {
		fmt.Fprintln(os.Stderr, "rgit-image:", err)
		os.Exit(1)
	}
}

func run(bin, ver, rev, created, arch, tag, out, layoutDir, digestFile string) error {
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}
	img, err := Build(Spec{Version: ver, Revision: rev, Created: t.UTC(), Arch: arch, Binaries: map[string]string{
		"rgit":       filepath.Join(bin, "rgit"),
		"rgit-admin": filepath.Join(bin, "rgit-admin"),
	}})
	if err != nil {
		return err
	}
	if err := WriteArchive(out, layoutDir, ref.String(), img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s\n", out, tag, d)
	if digestFile != "" {
		return os.WriteFile(digestFile, []byte(d.String()+"\n"), 0o644)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func pinMain(args []string) error {
	fs := flag.NewFlagSet("pin", flag.ContinueOnError)
	image := fs.String("image", "", "image reference with a digest: repo@sha256:…")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, f := range fs.Args() {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if b, err = Pin(b, *image); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

var imageLine = regexp.MustCompile(`(?m)^(\s*(?:-\s+)?image:\s*)\S+(.*)$`)

// Pin rewrites every container image in a manifest to image, which must
// name a digest: a tag can be moved under a running fleet, a digest
// cannot.
func Pin(manifest []byte, image string) ([]byte, error) {
	ref, err := name.NewDigest(image)
	if err != nil {
		return nil, fmt.Errorf("-image %q: want repo@sha256:<digest>: %w", image, err)
	}
	if !imageLine.Match(manifest) {
		return nil, fmt.Errorf("no image: line to pin")
	}
	return imageLine.ReplaceAll(manifest, []byte("${1}"+strings.ReplaceAll(ref.String(), "$", "")+"${2}")), nil
}
