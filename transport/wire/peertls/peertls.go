// Package peertls is the mutual TLS of the peer ports (peer HTTP and peer
// stream, which also carries rgit-admin). Every node, and rgit-admin,
// presents a certificate signed by the cluster's own CA
// (RGIT_PEER_TLS_CA) and accepts only certificates that CA signed; the
// peer secret stays a second factor on top. Peers are addressed by IP or
// by per-pod DNS names that change with the deployment, so the check is
// the CA signature, not a host name: the CA is the cluster's alone and
// signs nothing else. It imports only the standard library.
package peertls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// The variables naming the PEM files; set all three or none.
const (
	EnvCert = "RGIT_PEER_TLS_CERT"
	EnvKey  = "RGIT_PEER_TLS_KEY"
	EnvCA   = "RGIT_PEER_TLS_CA"
)

// Files names the PEM files of this side's certificate, its key and the
// CA that signs every peer's certificate.
type Files struct{ Cert, Key, CA string }

// FromEnv reads the file names from the RGIT_PEER_TLS_* variables.
func FromEnv(getenv func(string) string) Files {
	return Files{Cert: getenv(EnvCert), Key: getenv(EnvKey), CA: getenv(EnvCA)}
}

// Enabled reports whether any file is named (Load then requires all).
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Config is the loaded TLS of both sides of a peer connection.
type Config struct {
	// Server requires and verifies a client certificate signed by the CA.
	Server *tls.Config
	// Client presents this side's certificate and verifies the server's
	// against the CA.
	Client *tls.Config
}

// Load reads f. No file named: nil, nil (plaintext). Errors name the
// variable at fault.
func Load(f Files) (*Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	var missing []error
	for _, v := range [][2]string{{EnvCert, f.Cert}, {EnvKey, f.Key}, {EnvCA, f.CA}} {
		if v[1] == "" {
			missing = append(missing, fmt.Errorf("%s: required when any of %s, %s, %s is set", v[0], EnvCert, EnvKey, EnvCA))
		}
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", EnvCert, EnvKey, err)
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvCA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", EnvCA, f.CA)
	}
	return New(cert, pool), nil
}

// New builds the configs from a certificate and the CA pool.
func New(cert tls.Certificate, ca *x509.CertPool) *Config {
	return &Config{
		Server: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    ca,
		},
		Client: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			// The standard check would also match the host name, which
			// peers do not have in their certificates (see the package
			// doc); VerifyConnection does the chain check instead, so a
			// server without a certificate from the CA is still refused.
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				return verifyChain(cs, ca)
			},
		},
	}
}

// verifyChain checks the server's certificate chain against ca.
func verifyChain(cs tls.ConnectionState, ca *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peer tls: server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: ca, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("peer tls: server certificate not signed by the peer CA: %w", err)
	}
	return nil
}

// Scheme is the URL scheme of a peer port: https with TLS, else http.
func (c *Config) Scheme() string {
	if c == nil {
		return "http"
	}
	return "https"
}

// ClientTLS is c.Client, nil without TLS.
func (c *Config) ClientTLS() *tls.Config {
	if c == nil {
		return nil
	}
	return c.Client
}

// ServerTLS is c.Server, nil without TLS.
func (c *Config) ServerTLS() *tls.Config {
	if c == nil {
		return nil
	}
	return c.Server
}
