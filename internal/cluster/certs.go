package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of the key material one control plane needs. It is
// generated fresh for every cluster so nothing secret lives in the repository.
type pki struct {
	CACert       string // signs the serving certificate; clients trust it
	ServingCert  string
	ServingKey   string
	SAPublicKey  string // verifies service-account tokens (kube-apiserver)
	SAPrivateKey string // signs service-account tokens (apiserver, controller-manager)
	caPEM        []byte
}

// generatePKI writes a fresh CA, the API server's serving certificate and
// the service-account key pair into dir.
func generatePKI(dir string) (*pki, error) {
	p := &pki{
		CACert:       filepath.Join(dir, "ca.crt"),
		ServingCert:  filepath.Join(dir, "apiserver.crt"),
		ServingKey:   filepath.Join(dir, "apiserver.key"),
		SAPublicKey:  filepath.Join(dir, "sa.pub"),
		SAPrivateKey: filepath.Join(dir, "sa.key"),
	}
	now := time.Now()
	caKey, caCert, err := newCA(now)
	if err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw})
	servingKey, servingDER, err := newServingCert(now, caCert, caKey)
	if err != nil {
		return nil, err
	}
	// Service-account tokens are signed with RSA: every Kubernetes component
	// accepts it and it is what kubeadm generates.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	servingKeyDER, err := x509.MarshalECPrivateKey(servingKey)
	if err != nil {
		return nil, err
	}

	files := []struct {
		path  string
		block *pem.Block
	}{
		{p.CACert, &pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}},
		{p.ServingCert, &pem.Block{Type: "CERTIFICATE", Bytes: servingDER}},
		{p.ServingKey, &pem.Block{Type: "EC PRIVATE KEY", Bytes: servingKeyDER}},
		{p.SAPublicKey, &pem.Block{Type: "PUBLIC KEY", Bytes: saPub}},
		{p.SAPrivateKey, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(f.block), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return p, nil
}

// newCA makes a self-signed CA valid for a year from now.
func newCA(now time.Time) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gpuslice-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("self-sign CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	return caKey, caCert, nil
}

// newServingCert makes the API server's key and its certificate, signed by
// the CA, for the names and addresses clients reach it at.
func newServingCert(now time.Time, caCert *x509.Certificate, caKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte, error) {
	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate serving key: %w", err)
	}
	servingTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTmpl, caCert, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign serving certificate: %w", err)
	}
	return servingKey, servingDER, nil
}
