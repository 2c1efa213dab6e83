package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// WriteArchive writes img as an OCI image layout into the directory dir
// (replaced if present) and as a tar of it at out, tagged tag (annotation
// org.opencontainers.image.ref.name), with a docker-load manifest.json
// beside index.json. Entries are sorted and carry the image's creation
// time, so the archive is as reproducible as the image. `crane push dir`
// pushes the manifest as built (the pinned digest); crane given the tar
// reads manifest.json and would push a re-encoded manifest instead.
func WriteArchive(out, dir, tag string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	dm := dockerManifest{Config: "blobs/sha256/" + cfgName.Hex, RepoTags: []string{tag}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		dm.Layers = append(dm.Layers, "blobs/sha256/"+d.Hex)
	}
	b, err := json.Marshal([]dockerManifest{dm})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	return tarDir(out, dir, cf.Created.Time)
}

// dockerManifest is one entry of docker load's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// tarDir writes dir's files to out in lexical order (filepath.WalkDir's)
// with fixed times and owners.
func tarDir(out, dir string, mtime time.Time) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: mtime, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h.Typeflag, h.Size = tar.TypeReg, info.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("tar %s: %w", out, err)
	}
	return nil
}
