package peertls

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func generated(t *testing.T) (Files, *Config) {
	t.Helper()
	dir := t.TempDir()
	if err := Generate(dir, "test"); err != nil {
		t.Fatal(err)
	}
	f := Files{Cert: filepath.Join(dir, PeerFile), Key: filepath.Join(dir, PeerKeyFile), CA: filepath.Join(dir, CAFile)}
	c, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

// handshake runs a TLS handshake between client and server configs over
// loopback TCP and returns each side's error.
func handshake(t *testing.T, client, server *tls.Config) (cerr, serr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		err = tc.Handshake()
		if err == nil {
			// TLS 1.3: the client certificate is checked after the
			// client's handshake returns; a read sees the outcome.
			_, err = tc.Read(make([]byte, 1))
		}
		done <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		_, err = c.Write([]byte{1})
		if err == nil {
			_, err = c.Read(make([]byte, 1)) // the server's alert, if it refused
		}
		c.Close()
	}
	return err, <-done
}

func TestMutualAuth(t *testing.T) {
	_, a := generated(t)
	_, b := generated(t)
	if _, serr := handshake(t, a.Client, a.Server); serr != nil {
		t.Fatalf("same CA: server side %v", serr)
	}
	// A client whose certificate another CA signed is refused by the server.
	if _, serr := handshake(t, b.Client, a.Server); serr == nil {
		t.Fatal("server accepted a client certificate from a foreign CA")
	}
	// A server whose certificate another CA signed is refused by the client.
	if cerr, _ := handshake(t, a.Client, b.Server); cerr == nil || !strings.Contains(cerr.Error(), "not signed by the peer CA") {
		t.Fatalf("client accepted a foreign server: %v", cerr)
	}
	// A client without any certificate is refused.
	noCert := a.Client.Clone()
	noCert.Certificates = nil
	if _, serr := handshake(t, noCert, a.Server); serr == nil {
		t.Fatal("server accepted a client without a certificate")
	}
}

func TestLoadErrorsNameTheVariable(t *testing.T) {
	f, _ := generated(t)
	if c, err := Load(Files{}); c != nil || err != nil {
		t.Fatalf("no files: %v %v", c, err)
	}
	junk := filepath.Join(t.TempDir(), "junk.pem")
	os.WriteFile(junk, []byte("not pem"), 0o600)
	cases := []struct {
		f    Files
		want string
	}{
		{Files{Cert: f.Cert}, EnvKey},
		{Files{Cert: f.Cert, Key: f.Key}, EnvCA},
		{Files{Cert: junk, Key: f.Key, CA: f.CA}, EnvCert},
		{Files{Cert: f.Cert, Key: f.Key, CA: junk}, EnvCA},
		{Files{Cert: f.Cert, Key: f.Key, CA: junk + "x"}, EnvCA},
	}
	for _, c := range cases {
		if _, err := Load(c.f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.f, err, c.want)
		}
	}
	if err := Generate(filepath.Dir(f.CA), "again"); err == nil {
		t.Error("Generate overwrote existing certificates")
	}
}
