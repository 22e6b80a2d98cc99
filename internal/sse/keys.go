package sse

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// A Sealer seals data keys for storage and opens them again.
type Sealer interface {
	// Seal returns key sealed for storage.
	Seal(key DataKey) ([]byte, error)
	// Open returns the data key of a sealed key; ErrAuth if this sealer
	// cannot open it.
	Open(sealed []byte) (DataKey, error)
}

// Sealed key layout: version, mode, key ID length, key ID, 12-byte nonce,
// then the data key sealed (AES-256-GCM) with everything before it as
// associated data.
const (
	sealVersion  = 1
	modeCluster  = 1
	modeCustomer = 2
	maxKeyID     = 64
)

// ErrUnknownKey: a sealed key names a cluster key the keyring lacks.
var ErrUnknownKey = errors.New("sse: sealed by a cluster key not in the key file")

func seal(wrap []byte, mode byte, id string, key DataKey) ([]byte, error) {
	head := append([]byte{sealVersion, mode, byte(len(id))}, id...)
	nonce := make([]byte, 12)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append(head, nonce...)
	return newGCM(wrap).Seal(out, nonce, key[:], head), nil
}

// parseSealed splits a sealed key into its parts.
func parseSealed(b []byte) (mode byte, id string, head, nonce, ct []byte, err error) {
	if len(b) < 3 || b[0] != sealVersion {
		return 0, "", nil, nil, nil, ErrAuth
	}
	n := int(b[2])
	if len(b) != 3+n+12+KeySize+TagSize {
		return 0, "", nil, nil, nil, ErrAuth
	}
	head = b[:3+n]
	return b[1], string(b[3 : 3+n]), head, b[3+n : 3+n+12], b[3+n+12:], nil
}

func open(wrap []byte, head, nonce, ct []byte) (DataKey, error) {
	var k DataKey
	p, err := newGCM(wrap).Open(nil, nonce, ct, head)
	if err != nil {
		return k, ErrAuth
	}
	copy(k[:], p)
	return k, nil
}

// Keyring holds the cluster keys of SSE-S3, by ID. The newest (the last
// in its file) seals; every key opens what it sealed.
type Keyring struct {
	keys   map[string][]byte
	newest string
}

// ParseKeyring reads a key file: one key a line, "ID BASE64", where the
// key is KeySize random bytes and the ID a word of at most 64 bytes;
// blank lines and lines starting with # are skipped. The last key is the
// newest.
func ParseKeyring(file []byte) (*Keyring, error) {
	kr := &Keyring{keys: map[string][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(file))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("sse: key file line %d: want \"ID BASE64KEY\"", n)
		}
		key, err := base64.StdEncoding.DecodeString(f[1])
		switch {
		case err != nil || len(key) != KeySize:
			return nil, fmt.Errorf("sse: key file line %d: the key must be %d bytes, base64", n, KeySize)
		case len(f[0]) > maxKeyID:
			return nil, fmt.Errorf("sse: key file line %d: key ID longer than %d bytes", n, maxKeyID)
		case kr.keys[f[0]] != nil:
			return nil, fmt.Errorf("sse: key file line %d: key ID %q given twice", n, f[0])
		}
		kr.keys[f[0]], kr.newest = key, f[0]
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if kr.newest == "" {
		return nil, errors.New("sse: key file holds no key")
	}
	return kr, nil
}

// NewKeyLine returns a key file line with a new random key named id.
func NewKeyLine(id string) (string, error) {
	k, err := NewDataKey()
	if err != nil {
		return "", err
	}
	return id + " " + base64.StdEncoding.EncodeToString(k[:]) + "\n", nil
}

// Newest is the ID of the key that seals.
func (kr *Keyring) Newest() string { return kr.newest }

// Seal seals key under the newest cluster key.
func (kr *Keyring) Seal(key DataKey) ([]byte, error) {
	return seal(kr.keys[kr.newest], modeCluster, kr.newest, key)
}

// Open opens a key sealed by any key of the ring.
func (kr *Keyring) Open(sealed []byte) (DataKey, error) {
	mode, id, head, nonce, ct, err := parseSealed(sealed)
	if err != nil || mode != modeCluster {
		return DataKey{}, ErrAuth
	}
	wrap := kr.keys[id]
	if wrap == nil {
		return DataKey{}, fmt.Errorf("%w: %q", ErrUnknownKey, id)
	}
	return open(wrap, head, nonce, ct)
}

// CustomerKey is an SSE-C key, as the client sent it.
type CustomerKey struct {
	key []byte
}

// ErrCustomerKey: the SSE-C headers are missing, malformed, or disagree.
var ErrCustomerKey = errors.New("sse: bad customer key")

// ParseCustomerKey checks the three SSE-C headers' values: the algorithm
// (AES256), the base64 key (KeySize bytes) and the base64 MD5 of the key.
func ParseCustomerKey(algorithm, key, keyMD5 string) (CustomerKey, error) {
	if algorithm != "AES256" {
		return CustomerKey{}, fmt.Errorf("%w: the algorithm must be AES256", ErrCustomerKey)
	}
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(k) != KeySize {
		return CustomerKey{}, fmt.Errorf("%w: the key must be %d bytes, base64", ErrCustomerKey, KeySize)
	}
	sum := md5.Sum(k)
	if want, err := base64.StdEncoding.DecodeString(keyMD5); err != nil || !bytes.Equal(want, sum[:]) {
		return CustomerKey{}, fmt.Errorf("%w: the key's MD5 does not match", ErrCustomerKey)
	}
	return CustomerKey{key: k}, nil
}

// MD5 is the base64 MD5 of the key, as S3 echoes it.
func (ck CustomerKey) MD5() string {
	sum := md5.Sum(ck.key)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Seal seals key under the customer key.
func (ck CustomerKey) Seal(key DataKey) ([]byte, error) {
	return seal(ck.key, modeCustomer, "", key)
}

// Open opens a key sealed under the customer key.
func (ck CustomerKey) Open(sealed []byte) (DataKey, error) {
	mode, _, head, nonce, ct, err := parseSealed(sealed)
	if err != nil || mode != modeCustomer || len(ck.key) != KeySize {
		return DataKey{}, ErrAuth
	}
	return open(ck.key, head, nonce, ct)
}

// Verifier is what is stored of a customer key: a random salt and the
// HMAC-SHA256 of the key under it.
type Verifier struct {
	Salt []byte `json:"salt"`
	MAC  []byte `json:"mac"`
}

// NewVerifier returns a verifier of ck under a new random salt.
func (ck CustomerKey) NewVerifier() (Verifier, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return Verifier{}, err
	}
	return Verifier{Salt: salt, MAC: ck.mac(salt)}, nil
}

func (ck CustomerKey) mac(salt []byte) []byte {
	h := hmac.New(sha256.New, salt)
	h.Write(ck.key)
	return h.Sum(nil)
}

// Matches reports whether ck is the key v was made from.
func (v Verifier) Matches(ck CustomerKey) bool {
	return len(v.MAC) == sha256.Size && hmac.Equal(v.MAC, ck.mac(v.Salt))
}
