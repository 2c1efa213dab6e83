package peertls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// File names Generate writes into its directory.
const (
	CAFile      = "ca.pem"
	CAKeyFile   = "ca-key.pem"
	PeerFile    = "peer.pem"
	PeerKeyFile = "peer-key.pem"
)

// Validity of generated certificates.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	peerValidity = 5 * 365 * 24 * time.Hour
)

// Generate creates a new peer CA and one peer certificate it signs, usable
// by every node and by rgit-admin (client and server auth), in dir:
// CAFile, CAKeyFile, PeerFile, PeerKeyFile. Keys are ECDSA P-256, written
// 0600. It refuses to overwrite an existing file. Keep CAKeyFile out of
// the cluster: it is only needed to sign more certificates.
func Generate(dir, commonName string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName + " peer CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("create CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName + " peer"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(peerValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("create peer certificate: %w", err)
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	files := []struct {
		name, typ string
		der       []byte
		mode      os.FileMode
	}{
		{CAFile, "CERTIFICATE", caDER, 0o644},
		{CAKeyFile, "EC PRIVATE KEY", caKeyDER, 0o600},
		{PeerFile, "CERTIFICATE", der, 0o644},
		{PeerKeyFile, "EC PRIVATE KEY", keyDER, 0o600},
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f.name)); err == nil {
			return fmt.Errorf("%s exists; not overwriting peer certificates", filepath.Join(dir, f.name))
		}
	}
	for _, f := range files {
		if err := writeExcl(filepath.Join(dir, f.name), pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), f.mode); err != nil {
			return err
		}
	}
	return nil
}

func writeExcl(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // never fails (crypto/rand)
	return n
}
