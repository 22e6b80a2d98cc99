package gateway

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/pause"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Access keys. Two kinds sign requests:
//
//   - configured keys (Config.Credentials: --access-key, --credentials-file)
//     are administrators. They live in each gateway's configuration only,
//     so they work while the shard servers are unreachable and cannot be
//     locked out by anything stored in the cluster;
//   - stored keys (regen admin key create) live in the cluster's metadata:
//     an access key record on every shard server, written to a majority
//     and read from a majority like bucket records (buckets_layer.go), so
//     every gateway knows them. Their rights on a bucket are in the bucket
//     record (metadata.Bucket.Grants); an admin flag and a create-bucket
//     flag are in the key record.
//
// Gateways cache the stored keys for KeyCacheTTL: a deleted key stops
// working on every gateway within that time. An unknown access key makes
// the cache look again at most every keyRetry (the request waits for that
// read), so a key created through another gateway works at once, and a
// stream of made-up access keys cannot make a gateway ask every shard
// server on every request.
//
// Secret keys are stored sealed: AES-256-GCM under a key derived from the
// cluster secret (which every node is given and none stores), with the
// access key ID as associated data. A shard server's disk, or its backup,
// does not reveal them. SigV4 needs the secret itself to check a
// signature, so it cannot be stored as a one-way hash (S3 keeps secrets
// recoverable for the same reason). Changing the cluster secret makes the
// stored keys unusable: create them again.

// keyRetry is how often an unknown access key may make a gateway read the
// stored keys again.
const keyRetry = 250 * time.Millisecond

// KeyStore is the optional capability to keep access key records on shard
// servers; *shardrpc.Client has it. Without it, only configured keys work.
type KeyStore interface {
	// PutAccessKeyFenced stores k if newer, fenced by the lease on its
	// record (shardrpc.AccessKeyLeaseName) that lease holds.
	PutAccessKeyFenced(ctx context.Context, addr string, k *metadata.AccessKey, lease string) error
	// CreateAccessKeyFenced stores the new key k if newer, fenced by the
	// lease on its name (shardrpc.AccessKeyNameLeaseName) that lease holds.
	CreateAccessKeyFenced(ctx context.Context, addr string, k *metadata.AccessKey, lease string) error
	ListAccessKeys(ctx context.Context, addr string) ([]metadata.AccessKey, error)
}

// errNoKeyStore: this gateway cannot store access keys.
var errNoKeyStore = errors.New("this gateway cannot store access keys (no cluster secret, or a shard client without access key records)")

// principal is who signed a request.
type principal struct {
	accessKey string
	// configured: one of Config.Credentials, an administrator with no
	// stored record.
	configured    bool
	admin         bool
	createBuckets bool
}

// rights returns p's rights on bucket b as a whole (not those on a
// prefix of it).
func (p principal) rights(b *metadata.Bucket) metadata.Rights {
	if p.accessKey == "" {
		return metadata.Rights{}
	}
	return b.Grants[p.accessKey]
}

// rightsOn returns p's rights on the objects of b whose keys begin with
// path: those on the whole bucket and those on every prefix path begins
// with (metadata.Bucket.RightsOn).
func (p principal) rightsOn(b *metadata.Bucket, path string) metadata.Rights {
	if p.accessKey == "" {
		return metadata.Rights{}
	}
	return b.RightsOn(p.accessKey, path)
}

// anyRights reports whether p has a right on b or on a prefix of it:
// enough to see the bucket (ListBuckets, HeadBucket).
func (p principal) anyRights(b *metadata.Bucket) bool {
	return p.accessKey != "" && b.AnyRights(p.accessKey)
}

// storedKey is a stored access key with its secret opened.
type storedKey struct {
	rec    metadata.AccessKey
	secret string // "" for a tombstone or a secret this gateway cannot open
}

// keyCache holds every stored access key record (tombstones included),
// merged over the shard servers, for a short TTL.
type keyCache struct {
	ttl   time.Duration
	retry time.Duration
	// mu is held through a refresh: the requests that find the cache
	// stale wait for one read of the servers instead of each making one.
	mu    sync.Mutex
	at    time.Time
	valid bool
	keys  map[string]*storedKey
}

// keyring is the gateway's access to stored keys: the cache, the sealer
// of their secrets and the shard servers.
type keyring struct {
	cache keyCache
	aead  cipher.AEAD // nil without a cluster secret: no stored keys
	store KeyStore    // nil: no stored keys
	layer *layer
	log   *slog.Logger
}

// newKeyring returns the gateway's keyring; a gateway without a cluster
// secret or a KeyStore knows its configured keys only.
func newKeyring(cfg Config, l *layer, shards ShardAPI) (*keyring, error) {
	kr := &keyring{cache: keyCache{ttl: cfg.KeyCacheTTL, retry: keyRetry}, layer: l, log: cfg.Logger}
	kr.store, _ = shards.(KeyStore)
	if cfg.ClusterSecret == "" {
		return kr, nil
	}
	aead, err := newSealer(cfg.ClusterSecret)
	if err != nil {
		return nil, err
	}
	kr.aead = aead
	return kr, nil
}

// enabled reports whether this gateway can store and check stored keys.
func (kr *keyring) enabled() bool { return kr.aead != nil && kr.store != nil }

// newSealer derives the key that seals stored secret keys from the
// cluster secret.
func newSealer(clusterSecret string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, []byte(clusterSecret), nil, "regen access key secrets v1", 32)
	if err != nil {
		return nil, fmt.Errorf("gateway: derive the access key sealing key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// seal seals secret for the access key id: nonce || ciphertext.
func seal(aead cipher.AEAD, id, secret string) []byte {
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return aead.Seal(nonce, nonce, []byte(secret), []byte(id))
}

// unseal opens what seal sealed for id.
func unseal(aead cipher.AEAD, id string, sealed []byte) (string, error) {
	n := aead.NonceSize()
	if len(sealed) < n+aead.Overhead() {
		return "", errors.New("sealed secret too short")
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(id))
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

// newKeyPair makes a fresh access key ID (20 characters, like AWS's:
// "RK" and 18 of base32's letters and digits, 90 random bits) and secret
// key (40 characters of URL-safe base64, 240 random bits).
func newKeyPair() (id, secret string) {
	var b [30]byte
	rand.Read(b[:])
	return "RK" + rand.Text()[:18], base64.RawURLEncoding.EncodeToString(b[:])
}

// lookup returns the live stored key id, nil if there is none. It fails
// only when the stored keys cannot be read (a majority of shard servers
// did not answer) and the cached ones are too old to trust.
func (kr *keyring) lookup(ctx context.Context, id string) (*storedKey, error) {
	if !kr.enabled() {
		return nil, nil
	}
	c := &kr.cache
	arrived := time.Now()
	for {
		c.mu.Lock()
		age := time.Since(c.at)
		k := c.keys[id]
		known := k != nil && !k.rec.Deleted
		// NB: an unknown key is unknown for good only once a read of the
		// servers that began after this request arrived has not found it
		// (a key created through another gateway a moment ago, used
		// before the next read was due, failed with InvalidAccessKeyId:
		// TestAccessKeys, 2 runs in 4). Waiting for that read, instead of
		// making one, keeps made-up keys at one read per keyRetry.
		final := known || c.at.After(arrived)
		if !c.valid || age > c.ttl || (!final && age > c.retry) {
			err := kr.refreshLocked(ctx)
			k = c.keys[id]
			c.mu.Unlock()
			if err != nil {
				return nil, err
			}
		} else {
			c.mu.Unlock()
			if !final {
				if err := pause.For(ctx, c.retry-age); err != nil {
					return nil, err
				}
				continue
			}
		}
		if k == nil || k.rec.Deleted || k.secret == "" {
			return nil, nil
		}
		return k, nil
	}
}

// all returns every stored key record, tombstones included, read from the
// servers now.
func (kr *keyring) all(ctx context.Context) (map[string]*storedKey, error) {
	if !kr.enabled() {
		return nil, errNoKeyStore
	}
	c := &kr.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := kr.refreshLocked(ctx); err != nil {
		return nil, err
	}
	return c.keys, nil
}

// invalidate makes the next lookup read the servers.
func (kr *keyring) invalidate() {
	kr.cache.mu.Lock()
	defer kr.cache.mu.Unlock()
	kr.cache.valid = false
}

// refreshLocked reads the stored keys into the cache; c.mu is held.
// Secrets already opened are kept while their record is unchanged.
func (kr *keyring) refreshLocked(ctx context.Context) error {
	c := &kr.cache
	began := time.Now()
	recs, err := kr.layer.allAccessKeys(ctx, kr.store)
	if err != nil {
		return err
	}
	keys := make(map[string]*storedKey, len(recs))
	for id, rec := range recs {
		if old := c.keys[id]; old != nil && old.rec.Version == rec.Version {
			keys[id] = old
			continue
		}
		k := &storedKey{rec: rec}
		if !rec.Deleted {
			secret, err := unseal(kr.aead, id, rec.SealedSecret)
			if err != nil {
				// Sealed under another cluster secret, or damaged:
				// the key cannot sign anything here.
				kr.log.Warn("stored access key cannot be opened with this cluster secret; it is refused", "access_key", id, "name", rec.Name, "err", err)
			}
			k.secret = secret
		}
		keys[id] = k
	}
	// NB: the time the read began: lookup trusts it for keys created
	// before then.
	c.keys, c.at, c.valid = keys, began, true
	return nil
}

// allAccessKeys returns the newest record of every access key, tombstones
// included, merged over the live shard servers; a majority must answer.
func (l *layer) allAccessKeys(ctx context.Context, store KeyStore) (map[string]metadata.AccessKey, error) {
	return mergeNewest(ctx, l, "access keys", store.ListAccessKeys, func(k metadata.AccessKey) (string, metadata.Version) { return k.ID, k.Version })
}

// putAccessKey writes access key record k to every live shard server
// with put (fenced by the lease its caller holds) and needs a majority of
// them.
func (l *layer) putAccessKey(k *metadata.AccessKey, put func(addr string) error) error {
	ids, _ := l.liveShards()
	ok, errs := l.onLive(ids, func(_, addr string) error { return put(addr) })
	if need := len(ids)/2 + 1; ok < need || len(ids) == 0 {
		return fmt.Errorf("%w: access key record %s stored on %d of %d servers: %w", errUnavailable, k.ID, ok, len(ids), errors.Join(errs...))
	}
	return nil
}

// The two functions below are the only writers of access key records,
// for the reasons of updateBucket's: a key's record is one record, the
// newest winning whole, so a change of it is a read-modify-write, and a
// flag change that read the key before its deletion must not write it
// back. docs/CONSISTENCY.md, "Access-key records".

// updateAccessKey applies fn to the newest record of access key id and
// writes the result as a new version, which it returns. fn may refuse
// the change by returning an error, which is returned as is; errNotFound
// if the key does not exist or is deleted (a deleted key is never written
// back); OperationAborted if other changes of the key kept its lease for
// leaseWait.
//
// Like updateBucket, it holds the record's lease (on a majority of the
// live shard servers) from its read to its write, reads the record afresh
// under the lease from a majority (not the cache, which may hold the key
// as it was before a deletion through another gateway), takes a version
// newer than the one read, and writes it fenced by the lease, so a change
// whose lease ran out is refused rather than landing over the next
// holder's (a deletion's tombstone).
func (l *layer) updateAccessKey(ctx context.Context, store KeyStore, id string, fn func(*metadata.AccessKey) error) (*metadata.AccessKey, error) {
	var k metadata.AccessKey
	aborted := ErrOperationAborted.Withf("other changes of access key %s held it for %s: try again", id, leaseWait)
	err := l.underRecordLease(ctx, shardrpc.AccessKeyLeaseName(id), aborted, func(lctx context.Context, holder string) error {
		all, err := l.allAccessKeys(lctx, store)
		if err != nil {
			return err
		}
		var ok bool
		if k, ok = all[id]; !ok || k.Deleted {
			return errNotFound
		}
		read := k.Version
		if err := fn(&k); err != nil {
			return err
		}
		// Newer than the record read, whatever this gateway's clock
		// says: an older version would be dropped by every server.
		l.clock.observe(read)
		k.Version = l.clock.next()
		return l.putAccessKey(&k, func(addr string) error { return store.PutAccessKeyFenced(lctx, addr, &k, holder) })
	})
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// createAccessKey stores k, a new key (a fresh ID), unless a live key is
// named k.Name already; OperationAborted if other creations of the name
// kept its lease for leaseWait.
//
// Two creations of one name through two gateways must not both pass the
// check, so each holds the name's lease (on a majority of the live shard
// servers) from its check to its write: it reads every key afresh from a
// majority under the lease, and writes fenced by it (the servers check
// the name's lease, not the ID's: CreateAccessKeyFenced), so a creation
// whose lease ran out cannot land after the next holder's check. Only
// creations need it: nothing else gives a key a name, and a deletion
// racing a creation of its name at worst makes the creation fail.
func (l *layer) createAccessKey(ctx context.Context, store KeyStore, k *metadata.AccessKey) error {
	aborted := ErrOperationAborted.Withf("other creations of a key named %s held its name for %s: try again", k.Name, leaseWait)
	return l.underRecordLease(ctx, shardrpc.AccessKeyNameLeaseName(k.Name), aborted, func(lctx context.Context, holder string) error {
		all, err := l.allAccessKeys(lctx, store)
		if err != nil {
			return err
		}
		for _, o := range all {
			if !o.Deleted && o.Name == k.Name {
				return apiErr("InvalidArgument", fmt.Sprintf("a key named %s exists already (%s)", k.Name, o.ID))
			}
		}
		k.Version = l.clock.next()
		return l.putAccessKey(k, func(addr string) error { return store.CreateAccessKeyFenced(lctx, addr, k, holder) })
	})
}

// requestCreds looks up the secret key of one request's access key and
// remembers who it is. A lookup that cannot reach the stored keys is kept
// in err, so the request fails as unavailable (503) rather than with
// InvalidAccessKeyId: the key may well exist.
type requestCreds struct {
	g   *Gateway
	ctx context.Context
	who principal
	err error
}

// SecretKey implements sigv4.Credentials.
func (rc *requestCreds) SecretKey(id string) (string, bool) {
	if s, ok := rc.g.cfg.Credentials[id]; ok {
		rc.who = principal{accessKey: id, configured: true, admin: true, createBuckets: true}
		return s, true
	}
	k, err := rc.g.keys.lookup(rc.ctx, id)
	if err != nil {
		rc.err = err
		return "", false
	}
	if k == nil {
		return "", false
	}
	rc.who = principal{accessKey: id, admin: k.rec.Admin, createBuckets: k.rec.Admin || k.rec.CreateBuckets}
	return k.secret, true
}
