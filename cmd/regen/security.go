package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"
)

// minSecretLen is the shortest cluster secret accepted. Requests carry an
// HMAC under a key derived from the secret, so one captured request lets
// an attacker test guesses offline: the secret must not be guessable
// (regen dev and the README make 32 random hex digits).
const minSecretLen = 16

// checkClusterSecret refuses a missing or short cluster secret.
func checkClusterSecret(secret string) error {
	if secret == "" {
		return badOption("secret", "required: the cluster secret shared by all nodes (make one with: od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')")
	}
	if len(secret) < minSecretLen {
		return badOption("secret", "%d characters; use at least %d random ones (make one with: od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')", len(secret), minSecretLen)
	}
	return nil
}

// checkCredentials refuses the built-in default key pair, or either half
// of it, unless allowed: a configured key is an administrator, and the
// defaults are in the README. option is the flag the pairs came from, ""
// for --access-key and --secret-key, so the message names the half that
// is the default.
func checkCredentials(creds map[string]string, allowDefault bool, option string) error {
	if allowDefault {
		return nil
	}
	for access, secret := range creds {
		what := ""
		switch {
		case access == defaultAccessKey:
			what = "access key (" + defaultAccessKey + ")"
			if option == "" {
				option = "access-key"
			}
		case secret == defaultSecretKey:
			what = "secret key"
			if option == "" {
				option = "secret-key"
			}
		default:
			continue
		}
		return badOption(option, "refusing to start with the built-in default %s: set --access-key and --secret-key (REGEN_ACCESS_KEY, REGEN_SECRET_KEY), or pass --allow-default-credentials (REGEN_ALLOW_DEFAULT_CREDENTIALS=true) for a throwaway cluster", what)
	}
	return nil
}

// shardTLSFlags configure TLS on shard traffic: shard servers serve it,
// gateways and shard servers (as clients of their peers) speak it.
type shardTLSFlags struct {
	cert, key, ca, serverName string
}

func (f *shardTLSFlags) register(o *optionSet) {
	o.String(&f.cert, "shard-tls-cert", "REGEN_SHARD_TLS_CERT", "", "PEM certificate of this node for shard traffic (shard servers serve it; every node presents it to shard servers when --shard-tls-ca is set); needs --shard-tls-key")
	o.String(&f.key, "shard-tls-key", "REGEN_SHARD_TLS_KEY", "", "PEM private key of --shard-tls-cert")
	o.String(&f.ca, "shard-tls-ca", "REGEN_SHARD_TLS_CA", "", "PEM CA certificates that sign every node's shard certificate: shard traffic uses TLS, and shard servers require client certificates (mutual TLS)")
	o.String(&f.serverName, "shard-tls-server-name", "REGEN_SHARD_TLS_SERVER_NAME", "", "name every shard server's certificate is checked against (default: the host of its address)")
}

// Validate checks the shard TLS options.
func (f *shardTLSFlags) Validate() error {
	if (f.cert == "") != (f.key == "") {
		return badOption("shard-tls-cert", "--shard-tls-cert and --shard-tls-key go together")
	}
	return nil
}

// enabled reports whether shard traffic uses TLS.
func (f *shardTLSFlags) enabled() bool { return f.ca != "" || f.cert != "" }

// args passes the flags on to a dev child.
func (f *shardTLSFlags) args() []string {
	var a []string
	for _, kv := range [][2]string{{"--shard-tls-cert", f.cert}, {"--shard-tls-key", f.key}, {"--shard-tls-ca", f.ca}, {"--shard-tls-server-name", f.serverName}} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	return a
}

func (f *shardTLSFlags) load() (*tls.Certificate, *x509.CertPool, error) {
	var cert *tls.Certificate
	if f.cert != "" {
		c, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, nil, fmt.Errorf("shard TLS certificate: %w", err)
		}
		cert = &c
	}
	var pool *x509.CertPool
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, nil, fmt.Errorf("shard TLS CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, usageErrorf("--shard-tls-ca %s holds no PEM certificate", f.ca)
		}
	}
	return cert, pool, nil
}

// clientConfig is the TLS config of this node's calls to shard servers;
// nil when shard traffic is plain.
func (f *shardTLSFlags) clientConfig() (*tls.Config, error) {
	if !f.enabled() {
		return nil, nil
	}
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: f.serverName, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg, nil
}

// serverConfig is a shard server's TLS config; nil when plain. With a CA,
// peers must present a certificate it signed.
func (f *shardTLSFlags) serverConfig() (*tls.Config, error) {
	if !f.enabled() {
		return nil, nil
	}
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	if cert == nil {
		return nil, usageErrorf("a shard server with --shard-tls-ca needs its own --shard-tls-cert and --shard-tls-key")
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
	if pool != nil {
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// limitFlags are the listener limits of a gateway or shard server.
type limitFlags struct {
	readHeader, read, write, idle time.Duration
	maxConns, maxConnsPerIP       int
	maxHeader                     int64
}

// register declares the limit options with def's values as defaults.
func (f *limitFlags) register(o *optionSet, def limitFlags) {
	o.Duration(&f.readHeader, "read-header-timeout", "REGEN_READ_HEADER_TIMEOUT", def.readHeader, "time to read a request's headers (and, on the S3 port, a body of up to 1 MiB)")
	o.Duration(&f.read, "read-timeout", "REGEN_READ_TIMEOUT", def.read, "longest wait for more of a request body; S3 clients get RequestTimeout")
	o.Duration(&f.write, "write-timeout", "REGEN_WRITE_TIMEOUT", def.write, "longest wait for a client to take more of a response")
	o.Duration(&f.idle, "idle-timeout", "REGEN_IDLE_TIMEOUT", def.idle, "how long a keep-alive connection may wait for its next request")
	o.Int(&f.maxConns, "max-conns", "REGEN_MAX_CONNS", def.maxConns, "open connections at most; more are answered 503")
	o.Int(&f.maxConnsPerIP, "max-conns-per-ip", "REGEN_MAX_CONNS_PER_IP", def.maxConnsPerIP, "open connections at most from one client address, 0 = no cap; raise it behind a load balancer")
	o.Size(&f.maxHeader, "max-header-bytes", "REGEN_MAX_HEADER_BYTES", def.maxHeader, "largest request line and headers")
}

// Validate checks the limit options (the packages' Validate checks the
// rest once they are a config).
func (f *limitFlags) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read-header-timeout", f.readHeader}, {"read-timeout", f.read}, {"write-timeout", f.write}, {"idle-timeout", f.idle}} {
		if d.v <= 0 {
			return badOption(d.name, "must be positive")
		}
	}
	if f.maxConns < 0 {
		return badOption("max-conns", "must not be negative")
	}
	if f.maxConnsPerIP < 0 {
		return badOption("max-conns-per-ip", "must not be negative")
	}
	if f.maxHeader < 4<<10 || f.maxHeader > 1<<20 {
		return badOption("max-header-bytes", "want 4KiB..1MiB")
	}
	return nil
}
