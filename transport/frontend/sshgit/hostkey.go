package sshgit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKey is the server's public host key.
func (s *Server) HostKey() gossh.PublicKey { return s.hostKey }

// KnownHostsLine is the known_hosts line of key for a server reached at
// hosts ("name" for port 22, "name:port" otherwise).
func KnownHostsLine(hosts []string, key gossh.PublicKey) string {
	return knownhosts.Line(hosts, key)
}

// KnownHostsNames are the names a known_hosts line lists for a server
// listening on listen: the name clients use when given (port 22 unless
// it has one), else the listen address, and for a loopback or wildcard
// listen address both 127.0.0.1 and localhost with its port.
func KnownHostsNames(listen, name string) ([]string, error) {
	if name != "" {
		return []string{name}, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("ssh listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && (ip.IsUnspecified() || ip.IsLoopback()) {
		return []string{net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("localhost", port)}, nil
	}
	return []string{net.JoinHostPort(host, port)}, nil
}

// PublicKeyPath is where the public half of the host key at path is
// written.
func PublicKeyPath(path string) string { return path + ".pub" }

// writePublicKey writes key beside the host key at path, in
// authorized_keys format, unless the file already says so.
func writePublicKey(path string, key gossh.PublicKey) error {
	pub := PublicKeyPath(path)
	want := gossh.MarshalAuthorizedKey(key)
	if have, err := os.ReadFile(pub); err == nil && bytes.Equal(have, want) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(pub), ".host_key.pub-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", pub, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(want); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", pub, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", pub, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", pub, err)
	}
	if err := os.Rename(tmp.Name(), pub); err != nil {
		return fmt.Errorf("write %s: %w", pub, err)
	}
	return nil
}

// loadOrCreateHostKey reads the host key at path, generating and writing an
// ed25519 key first if the file does not exist. created reports generation.
// Nodes sharing one path (one host key for a fleet on one machine) that
// start at once agree on one key.
func loadOrCreateHostKey(path string) (signer gossh.Signer, created bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		data, err = createHostKey(path)
		created = err == nil
		if errors.Is(err, fs.ErrExist) {
			// Another process created it between our read and create.
			data, err = os.ReadFile(path)
			created = false
		}
	}
	if err != nil {
		return nil, false, err
	}
	signer, err = gossh.ParsePrivateKey(data)
	if err != nil {
		return nil, false, fmt.Errorf("parse %s: %w", path, err)
	}
	return signer, created, nil
}

// createHostKey writes a new key to path unless a file is there, whole:
// it is written under a temporary name and linked into place, so a
// concurrent reader never sees it half written. An existing file is
// fs.ErrExist.
func createHostKey(path string) ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ed25519 key: %w", err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "rgit host key")
	if err != nil {
		return nil, fmt.Errorf("marshal host key: %w", err)
	}
	data := pem.EncodeToMemory(block)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create host key dir: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".host_key-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	// Link, unlike rename, never replaces a key another process just
	// wrote.
	if err := os.Link(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return data, nil
}
