package tests

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/regen-s3/regen/internal/sigv4"
)

// TestTLSAndAuth serves S3 over TLS (where SDKs send aws-chunked bodies
// with trailing checksums), with a credentials file of extra keys and a
// domain for virtual-hosted-style requests; it checks presigned expiry and
// clock skew.
func TestTLSAndAuth(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	cert, key, pool := selfSigned(t, dir)
	creds := filepath.Join(dir, "creds")
	if err := os.WriteFile(creds, []byte("# extra keys\nsecond-key second-secret-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDevIn(t, filepath.Join(dir, "data"), "--tls-cert", cert, "--tls-key", key, "--credentials-file", creds, "--domain", "s3.test")
	if !strings.HasPrefix(d.info.Endpoint, "https://") {
		t.Fatalf("endpoint %s is not https", d.info.Endpoint)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	hc := &http.Client{Transport: tr}
	host := strings.TrimPrefix(d.info.Endpoint, "https://")
	client := func(access, secret string) *minio.Client {
		c, err := minio.New(host, &minio.Options{
			Creds: credentials.NewStaticV4(access, secret, ""), Secure: true, Region: "us-east-1",
			Transport: tr, TrailingHeaders: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := client(d.info.AccessKey, d.info.SecretKey)
	mustMakeBucket(t, c, "tls")

	// Streaming uploads with trailing checksums, single and multipart.
	data := randomData(12<<20+5, 20)
	for _, o := range []minio.PutObjectOptions{
		{Checksum: minio.ChecksumCRC32C, DisableMultipart: true},
		{Checksum: minio.ChecksumSHA256, PartSize: 5 << 20},
	} {
		if _, err := c.PutObject(ctx(t), "tls", "obj", bytes.NewReader(data), int64(len(data)), o); err != nil {
			t.Fatalf("PUT over TLS (%v): %v", o.Checksum, err)
		}
		if got := get(t, c, "tls", "obj", minio.GetObjectOptions{}); !bytes.Equal(got, data) {
			t.Fatalf("GET over TLS (%v): wrong bytes", o.Checksum)
		}
	}

	// The second key from the credentials file works; a wrong one does not.
	if _, err := client("second-key", "second-secret-key").ListBuckets(ctx(t)); err != nil {
		t.Errorf("key from the credentials file: %v", err)
	}
	if _, err := client("second-key", "wrong").ListBuckets(ctx(t)); minio.ToErrorResponse(err).Code != "SignatureDoesNotMatch" {
		t.Errorf("wrong secret: %v", err)
	}

	// Virtual-hosted style: the bucket is in the Host header.
	req, _ := http.NewRequest(http.MethodGet, d.info.Endpoint+"/obj", nil)
	req.Host = "tls.s3.test:" + portOf(host)
	sigv4.Sign(req, d.info.AccessKey, d.info.SecretKey, "us-east-1", time.Now(), "UNSIGNED-PAYLOAD")
	if status, body := send(t, hc, req); status != 200 || !bytes.Equal(body, data) {
		t.Errorf("virtual-hosted GET: %d, %d bytes", status, len(body))
	}

	// Presigned GET: works, then expires. NB: the expired URL is one
	// presigned 3 s ago for 2 s, not the fresh one 3 s later: the gateway
	// judges both by X-Amz-Date and X-Amz-Expires against its clock.
	presigned := func(at time.Time) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, d.info.Endpoint+"/tls/obj", nil)
		sigv4.Presign(req, d.info.AccessKey, d.info.SecretKey, "us-east-1", at, 2*time.Second)
		return req
	}
	if status, _ := send(t, hc, presigned(time.Now())); status != 200 {
		t.Errorf("fresh presigned GET: %d", status)
	}
	if status, body := send(t, hc, presigned(time.Now().Add(-3*time.Second))); status != 403 || !strings.Contains(string(body), "AccessDenied") {
		t.Errorf("expired presigned GET: %d %s", status, body)
	}

	// Clock skew beyond 15 minutes.
	req, _ = http.NewRequest(http.MethodGet, d.info.Endpoint+"/tls/obj", nil)
	sigv4.Sign(req, d.info.AccessKey, d.info.SecretKey, "us-east-1", time.Now().Add(-20*time.Minute), "UNSIGNED-PAYLOAD")
	if status, body := send(t, hc, req); status != 403 || !strings.Contains(string(body), "RequestTimeTooSkewed") {
		t.Errorf("skewed request: %d %s", status, body)
	}
}

func send(t *testing.T, hc *http.Client, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func portOf(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "regen test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"*.s3.test", "localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}
