package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// TestShardTLS runs a dev cluster whose shard traffic is mutual TLS
// (--shard-tls-cert, --shard-tls-key, --shard-tls-ca): objects round-trip,
// and a shard server refuses a client without a certificate of the
// cluster's CA even when it signs its requests with the cluster secret,
// and one that does not speak TLS.
func TestShardTLS(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	ca, cert, key, pool := clusterCerts(t, dir)
	d := startDevIn(t, filepath.Join(dir, "data"), "--shard-tls-cert", cert, "--shard-tls-key", key, "--shard-tls-ca", ca)
	c := d.client(t)
	mustMakeBucket(t, c, "tls")
	data := randomData(3<<20+17, 31) // striped: shard streams over TLS
	put(t, c, "tls", "obj", data, minio.PutObjectOptions{})
	if got := get(t, c, "tls", "obj", minio.GetObjectOptions{}); string(got) != string(data) {
		t.Fatal("object read back over TLS shard traffic differs")
	}

	addr := d.info.Shards[0].Addr
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	member := shardrpc.New(d.info.Secret, shardrpc.WithTLS(nil, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}))
	if _, err := member.Stats(ctx(t), addr); err != nil {
		t.Fatalf("a cluster member over mutual TLS: %v", err)
	}
	noCert := shardrpc.New(d.info.Secret, shardrpc.WithTLS(nil, &tls.Config{RootCAs: pool}))
	if _, err := noCert.Stats(ctx(t), addr); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	plain := shardrpc.New(d.info.Secret, nil)
	if _, err := plain.Stats(ctx(t), addr); err == nil {
		t.Fatal("a plain-HTTP client was served by a TLS shard server")
	}
}

// clusterCerts makes a CA and one node certificate it signs, good for
// serving and for client authentication on 127.0.0.1, as PEM files.
func clusterCerts(t *testing.T, dir string) (caFile, certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "regen test cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IsCA: true, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	nodeKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	nodeTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "regen node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	nodeDER, err := x509.CreateCertificate(rand.Reader, nodeTmpl, caCert, &nodeKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node.pem"), filepath.Join(dir, "node-key.pem")
	for f, b := range map[string]*pem.Block{
		caFile: {Type: "CERTIFICATE", Bytes: caDER}, certFile: {Type: "CERTIFICATE", Bytes: nodeDER}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kb},
	} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return caFile, certFile, keyFile, pool
}
