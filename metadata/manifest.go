package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Manifest describes one object version (or a delete tombstone).
//
// Geometry: each part is cut into stripes of DataShards*ChunkSize bytes; the
// last stripe may be shorter, and its shard chunk length is the smallest
// multiple of the code's ShardMultiple that holds its share (see
// Part.StripeChunks). On each placement server a part is one shard file
// holding that server's chunk of every stripe, back to back.
type Manifest struct {
	Bucket  string  `json:"bucket"`
	Key     string  `json:"key"`
	Version Version `json:"version"`
	// Deleted marks a tombstone: the key was deleted at Version. With a
	// VersionID it is a delete marker of a versioned bucket.
	Deleted bool `json:"deleted,omitempty"`
	// Versioned marks a write made while its bucket's versioning was
	// Enabled: the write is a new version of the key, not a replacement
	// of its null version. The gateway sets it; a shard server storing
	// such a manifest without a VersionID sets VersionID to
	// Version.String() (every server gets the same Version, so every
	// server names the version alike, and the gateway, which assigns the
	// Version while it commits, knows the ID without asking).
	Versioned bool `json:"versioned,omitempty"`
	// VersionID is the S3 version ID of a Versioned manifest, fixed when
	// it is first stored and copied with the manifest from then on (a
	// repair switch or a tag update changes Version, not VersionID).
	// Empty is the key's null version. The confirm job keeps the newest
	// manifest of every version ID (see DropPrevious), so these fields
	// alone tell a shard server what versioning asks of it.
	VersionID string `json:"version_id,omitempty"`

	Size         int64             `json:"size"`
	ETag         string            `json:"etag"` // without quotes
	ContentType  string            `json:"content_type,omitempty"`
	UserMeta     map[string]string `json:"user_meta,omitempty"`     // x-amz-meta-* without prefix, lowercased keys
	Headers      map[string]string `json:"headers,omitempty"`       // Cache-Control, Content-Disposition, ... as sent
	StorageClass string            `json:"storage_class,omitempty"` // as reported to S3 clients
	Modified     time.Time         `json:"modified"`
	// Checksums holds verified x-amz-checksum-* values by algorithm name
	// ("CRC32C"...), base64 as S3 sends them. A multipart object's are
	// checksums of its part checksums, suffixed "-N", as S3 reports them.
	Checksums map[string]string `json:"checksums,omitempty"`
	// ACL is the object's canned ACL ("public-read"...); empty is private.
	ACL string `json:"acl,omitempty"`
	// Tags are the object's tags (x-amz-tagging, PutObjectTagging).
	Tags map[string]string `json:"tags,omitempty"`
	// SSE is set when the object is encrypted at rest; Size is then the
	// plaintext size and the parts hold Size+SSE.Overhead bytes.
	SSE *Encryption `json:"sse,omitempty"`
	// Lock is the version's object lock (retention and legal hold), nil
	// when it has none. It belongs to the version: an update writes a
	// newer manifest of the same VersionID (docs/OBJECTLOCK.md).
	Lock *Lock `json:"lock,omitempty"`

	// Code is the codec name, e.g. "rs-6-3"; CodecFormat the codec.FormatVersion.
	Code        string `json:"code"`
	CodecFormat int    `json:"codec_format"`
	// ChunkSize is the shard chunk length of every full stripe.
	ChunkSize int64 `json:"chunk_size"`
	// Placement lists the node IDs holding shard 0..n-1, in shard order.
	Placement []string `json:"placement"`
	// Parts in order; a single-part PUT has exactly one.
	Parts []Part `json:"parts,omitempty"`
	// Inline holds the whole object when it is small; then Parts is empty.
	Inline []byte `json:"inline,omitempty"`
	// DataOf names the version that wrote this manifest's inline data,
	// when that is an older version of the key (zero: this one). A repair
	// switch (or any newer manifest of the same data) sets it, so that a
	// shard server holding that version's data keeps it where it is
	// instead of writing the same bytes again under the new version's
	// key (store_inline.go).
	DataOf Version `json:"data_of,omitzero"`

	// home is where the store keeps this manifest's inline data, for a
	// manifest read from the store (homeNone otherwise): a write that
	// moves versions (writeVersionsWith) leaves data where it is when it
	// can and knows what it must move or delete. Inline may be unread
	// (nil) while home says there is data (see unread).
	home inlineHome
}

// inlineHome is where a stored manifest's inline data lives
// (store_inline.go).
type inlineHome uint8

const (
	homeNone    inlineHome = iota // no inline data stored, or not read from the store
	homeKey                       // under 'i' esc(bucket) key: a current record of the first layout
	homeRecord                    // in the record's JSON: a previous version of the first layout
	homeVersion                   // under 'w' esc(bucket) esc(key) version: the current layout
)

// DataVersion is the version under whose key the store keeps m's inline
// data: DataOf, or m's own version.
func (m *Manifest) DataVersion() Version {
	if m.DataOf.IsZero() {
		return m.Version
	}
	return m.DataOf
}

// unread reports whether m was read from the store without the inline
// data its record says it has.
func (m *Manifest) unread() bool {
	return m.home != homeNone && len(m.Inline) == 0
}

// Part is one independently encoded stripe group: a whole single-part object
// or one part of a multipart upload.
type Part struct {
	Number int    `json:"number"`
	ID     string `json:"id"` // shard file ID, unique per part; never derived from the key
	Size   int64  `json:"size"`
	ETag   string `json:"etag,omitempty"`
	// ShardCRC is the CRC-32C of each whole shard file's data, by shard
	// index, so a rebuilt shard can be verified before it is used.
	ShardCRC []uint32 `json:"shard_crc"`
	// Checksums are the part's x-amz-checksum-* values verified at upload
	// (multipart parts only), by algorithm name, base64.
	Checksums map[string]string `json:"checksums,omitempty"`
	// SealedKey is the part's data key, sealed (internal/sse), when the
	// object is encrypted; Size is then the part's stored (sealed) size.
	SealedKey []byte `json:"sealed_key,omitempty"`
}

// Encryption describes how an object is encrypted at rest (internal/sse):
// each part under its own data key (Part.SealedKey), sealed by the
// cluster's key ring (SSE-S3) or by the client's key (SSE-C), which is
// never stored: only Salt and MAC, which verify it.
type Encryption struct {
	// Customer is set for SSE-C.
	Customer bool `json:"customer,omitempty"`
	// Salt and MAC verify an SSE-C key (sse.Verifier).
	Salt []byte `json:"salt,omitempty"`
	MAC  []byte `json:"mac,omitempty"`
	// Overhead is what sealing added: the parts' stored sizes minus the
	// plaintext size.
	Overhead int64 `json:"overhead,omitempty"`
}

// Errors returned by Validate.
var ErrInvalidManifest = errors.New("metadata: invalid manifest")

// Validate checks the invariants every stored manifest must hold.
func (m *Manifest) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %s/%s: %s", ErrInvalidManifest, m.Bucket, m.Key, fmt.Sprintf(format, a...))
	}
	switch {
	case m.Bucket == "":
		return bad("empty bucket")
	case m.Key == "":
		return bad("empty key")
	case m.Version.IsZero():
		return bad("zero version")
	case m.VersionID == NullVersionID:
		return bad("version ID %q is reserved for the null version (empty)", NullVersionID)
	case m.VersionID != "" && !m.Versioned:
		return bad("a version ID without Versioned")
	}
	if m.Deleted {
		return nil
	}
	if m.Size < 0 {
		return bad("negative size")
	}
	var overhead int64
	if m.SSE != nil {
		overhead = m.SSE.Overhead
		if overhead < 0 || m.Size > 0 && len(m.Parts) == 0 {
			return bad("encrypted object needs parts and a non-negative overhead")
		}
	}
	if m.Inline != nil || m.Size == 0 {
		if int64(len(m.Inline)) != m.Size || overhead != 0 {
			return bad("inline data has %d bytes, size is %d", len(m.Inline), m.Size)
		}
		return nil
	}
	if m.Code == "" || m.ChunkSize <= 0 || len(m.Placement) == 0 || len(m.Parts) == 0 {
		return bad("striped object needs code, chunk size, placement and parts")
	}
	seen := make(map[string]bool, len(m.Placement))
	for _, id := range m.Placement {
		if seen[id] {
			return bad("node %s holds two shards of one stripe", id)
		}
		seen[id] = true
	}
	var total int64
	for _, p := range m.Parts {
		if p.ID == "" || p.Size < 0 || len(p.ShardCRC) != len(m.Placement) {
			return bad("part %d: needs ID, size and one CRC per shard", p.Number)
		}
		if (m.SSE != nil) != (p.SealedKey != nil) {
			return bad("part %d: a sealed key if and only if the object is encrypted", p.Number)
		}
		total += p.Size
	}
	if total != m.Size+overhead {
		return bad("parts add up to %d bytes, size is %d with %d of encryption overhead", total, m.Size, overhead)
	}
	return nil
}

// NullVersionID is how S3 names the version of a write made while its
// bucket's versioning was not Enabled (Manifest.VersionID empty).
const NullVersionID = "null"

// S3VersionID is m's version ID as S3 clients see it. A Versioned
// manifest not stored yet has its Version's (see Manifest.Versioned).
func (m *Manifest) S3VersionID() string {
	switch {
	case m.VersionID != "":
		return m.VersionID
	case m.Versioned:
		return m.Version.String()
	}
	return NullVersionID
}

// Newer reports whether m should replace cur (nil cur means nothing stored).
func (m *Manifest) Newer(cur *Manifest) bool {
	return cur == nil || cur.Version.Less(m.Version)
}

// StripeGeometry describes how a part of size bytes is cut into stripes.
type StripeGeometry struct {
	K         int   // data shards
	ChunkSize int64 // shard chunk of a full stripe
	Multiple  int64 // code's ShardMultiple
}

// Stripes returns the number of stripes of a part of size bytes.
func (g StripeGeometry) Stripes(size int64) int64 {
	full := int64(g.K) * g.ChunkSize
	return (size + full - 1) / full
}

// Chunk returns the shard chunk length of stripe s of a part of size bytes,
// and the number of data bytes that stripe holds.
func (g StripeGeometry) Chunk(size int64, s int64) (chunk, data int64) {
	full := int64(g.K) * g.ChunkSize
	start := s * full
	data = min(full, size-start)
	if data == full {
		return g.ChunkSize, data
	}
	per := (data + int64(g.K) - 1) / int64(g.K)
	chunk = (per + g.Multiple - 1) / g.Multiple * g.Multiple
	return chunk, data
}

// ShardFileSize is the data length of every shard file of a part.
func (g StripeGeometry) ShardFileSize(size int64) int64 {
	n := g.Stripes(size)
	if n == 0 {
		return 0
	}
	last, _ := g.Chunk(size, n-1)
	return (n-1)*g.ChunkSize + last
}

// Bucket is a bucket record. Every shard server keeps every bucket record.
type Bucket struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Version Version   `json:"version"`
	Deleted bool      `json:"deleted,omitempty"`
	// Code is the bucket's default code name; empty means the cluster default.
	Code string `json:"code,omitempty"`
	// ACL is the bucket's canned ACL ("public-read"...); empty is private.
	ACL string `json:"acl,omitempty"`
	// Ownership is the bucket's object ownership control
	// (BucketOwnerEnforced, BucketOwnerPreferred, ObjectWriter); empty
	// when none was set.
	Ownership string `json:"ownership,omitempty"`
	// Tags are the bucket's tags (PutBucketTagging).
	Tags map[string]string `json:"tags,omitempty"`
	// CORS are the bucket's CORS rules (PutBucketCors), in order.
	CORS []CORSRule `json:"cors,omitempty"`
	// Policy is the bucket policy document as put (JSON); empty for none.
	Policy string `json:"policy,omitempty"`
	// Lifecycle are the bucket's lifecycle rules
	// (PutBucketLifecycleConfiguration), in order; nil for none.
	Lifecycle []LifecycleRule `json:"lifecycle,omitempty"`
	// Encryption is the bucket's default encryption (PutBucketEncryption):
	// "AES256" (SSE-S3) encrypts every write that asks for none; empty
	// for none.
	Encryption string `json:"encryption,omitempty"`
	// Grants are the rights of stored access keys on this bucket, by
	// access key ID. They live in the bucket record, not the key's, so
	// they end with the bucket: a bucket deleted and created again under
	// the same name starts with only its creator's grant. Keys given to
	// the gateways by flags are administrators and need none.
	Grants map[string]Rights `json:"grants,omitempty"`
	// PrefixGrants are rights of stored access keys on the keys of this
	// bucket that begin with a prefix, by access key ID, sorted by
	// prefix, one entry per prefix. They are apart from Grants so that a
	// gateway that does not know them (an older version) sees no right
	// at all for a key that has only these, never a wider one.
	PrefixGrants map[string][]PrefixRights `json:"prefix_grants,omitempty"`
	// Versioning is the bucket's versioning state: empty (never enabled),
	// VersioningEnabled or VersioningSuspended. Once set it never returns
	// to empty, as in S3.
	Versioning string `json:"versioning,omitempty"`
	// ObjectLock is set when the bucket was created with object lock;
	// its versioning is then Enabled for good. LockDefault is its
	// default retention (PutObjectLockConfiguration), nil for none.
	ObjectLock  bool      `json:"object_lock,omitempty"`
	LockDefault *LockRule `json:"lock_default,omitempty"`
}

// Object lock retention modes (S3's ObjectLockRetentionMode).
const (
	LockGovernance = "GOVERNANCE"
	LockCompliance = "COMPLIANCE"
)

// Lock is one version's object lock: a retention (Mode and RetainUntil,
// both set or both empty) and a legal hold, independent of each other.
type Lock struct {
	Mode        string    `json:"mode,omitempty"`
	RetainUntil time.Time `json:"retain_until,omitzero"`
	LegalHold   bool      `json:"legal_hold,omitempty"`
}

// Retained reports whether the lock keeps its version at now: a
// retention that has not run out, or a legal hold.
func (l *Lock) Retained(now time.Time) bool {
	return l != nil && (l.LegalHold || (l.Mode != "" && now.Before(l.RetainUntil)))
}

// Protects reports whether the lock forbids removing its version at
// now: a legal hold, or a retention that has not run out, unless it is
// GOVERNANCE and the removal bypasses it (S3's
// x-amz-bypass-governance-retention). COMPLIANCE is never bypassed.
// The gateway and every shard server judge removals by it.
func (l *Lock) Protects(now time.Time, bypass bool) bool {
	return l.Retained(now) && (l.LegalHold || l.Mode != LockGovernance || !bypass)
}

// AllowsNext reports whether next may replace l as the lock of the same
// version at now: anything unless l is a COMPLIANCE retention in force,
// which next must keep in the same mode until the same date or later.
// GOVERNANCE retentions and legal holds are changed by the bucket's
// owner, whom a shard server cannot tell from any other holder of the
// cluster secret, so only COMPLIANCE binds every writer here.
func (l *Lock) AllowsNext(next *Lock, now time.Time) bool {
	if l == nil || l.Mode != LockCompliance || !now.Before(l.RetainUntil) {
		return true
	}
	return next != nil && next.Mode == LockCompliance && !next.RetainUntil.Before(l.RetainUntil)
}

// SameData reports whether m and o describe the same object data: size,
// ETag, code and geometry, the parts (IDs, sizes, shard CRCs, sealed
// keys), inline bytes and encryption. A repair switch (another
// placement) or a metadata update (tags, ACL, lock) keeps it.
func (m *Manifest) SameData(o *Manifest) bool {
	if m.Size != o.Size || m.ETag != o.ETag || m.Deleted != o.Deleted || m.Code != o.Code || m.CodecFormat != o.CodecFormat ||
		m.ChunkSize != o.ChunkSize || !bytes.Equal(m.Inline, o.Inline) || len(m.Parts) != len(o.Parts) || (m.SSE == nil) != (o.SSE == nil) {
		return false
	}
	if m.SSE != nil && (m.SSE.Customer != o.SSE.Customer || m.SSE.Overhead != o.SSE.Overhead ||
		!bytes.Equal(m.SSE.Salt, o.SSE.Salt) || !bytes.Equal(m.SSE.MAC, o.SSE.MAC)) {
		return false
	}
	for i, p := range m.Parts {
		q := o.Parts[i]
		if p.Number != q.Number || p.ID != q.ID || p.Size != q.Size || p.ETag != q.ETag ||
			!slices.Equal(p.ShardCRC, q.ShardCRC) || !bytes.Equal(p.SealedKey, q.SealedKey) {
			return false
		}
	}
	return true
}

// LockRule is a bucket's default retention: every new version that
// names none is retained in Mode for Days or Years (one of them set)
// from its creation.
type LockRule struct {
	Mode  string `json:"mode"`
	Days  int    `json:"days,omitempty"`
	Years int    `json:"years,omitempty"`
}

// Until is the retain-until date of a version created at t.
func (r LockRule) Until(t time.Time) time.Time {
	return t.AddDate(r.Years, 0, r.Days)
}

// Bucket versioning states (S3's VersioningConfiguration Status).
const (
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// Rights are what an access key may do in one bucket. They are
// independent of each other (owner does not imply read): a read-only key
// for a dashboard and a write-only key for a log shipper are both usual,
// and the creator of a bucket gets all three.
type Rights struct {
	// Read: GET and HEAD of objects, listings, object tags and ACLs.
	Read bool `json:"read,omitempty"`
	// Write: PUT, DELETE, copies into the bucket, multipart uploads,
	// object tags.
	Write bool `json:"write,omitempty"`
	// Owner: the bucket's configuration (policy, CORS, tags, ACLs,
	// ownership controls, versioning) and deleting the bucket.
	Owner bool `json:"owner,omitempty"`
}

// Any reports whether r grants anything.
func (r Rights) Any() bool { return r.Read || r.Write || r.Owner }

// Union returns the rights r or o grants.
func (r Rights) Union(o Rights) Rights {
	return Rights{Read: r.Read || o.Read, Write: r.Write || o.Write, Owner: r.Owner || o.Owner}
}

// PrefixRights are an access key's rights on the objects of a bucket
// whose keys begin with Prefix (a literal prefix: "logs/" covers
// "logs/a" and not "logs", "logs" covers "logsx" too). Owner on a prefix
// is the owner's object-level calls there (object ACLs, legal holds,
// bypassing GOVERNANCE retention), never the bucket's configuration.
type PrefixRights struct {
	Prefix string `json:"prefix"`
	Rights
}

// RightsOn returns the rights access key id has on the objects of b whose
// keys begin with path: its rights on the whole bucket and those of every
// prefix grant that path begins with. For an object path is its key; for
// a listing, the listing's prefix (every key listed begins with it).
func (b *Bucket) RightsOn(id, path string) Rights {
	r := b.Grants[id]
	for _, p := range b.PrefixGrants[id] {
		if strings.HasPrefix(path, p.Prefix) {
			r = r.Union(p.Rights)
		}
	}
	return r
}

// AnyRights reports whether access key id has a right on b or on a
// prefix of it.
func (b *Bucket) AnyRights(id string) bool {
	if b.Grants[id].Any() {
		return true
	}
	for _, p := range b.PrefixGrants[id] {
		if p.Any() {
			return true
		}
	}
	return false
}

// CORSRule is one rule of a bucket's CORS configuration, as S3 has it.
// Origins and headers may hold one '*' wildcard each.
type CORSRule struct {
	ID             string   `json:"id,omitempty"`
	AllowedOrigins []string `json:"allowed_origins"`
	AllowedMethods []string `json:"allowed_methods"`
	AllowedHeaders []string `json:"allowed_headers,omitempty"`
	ExposeHeaders  []string `json:"expose_headers,omitempty"`
	// MaxAgeSeconds is how long a browser may cache a preflight answer;
	// nil when the rule sets none.
	MaxAgeSeconds *int `json:"max_age_seconds,omitempty"`
}

// LifecycleRule is one rule of a bucket's lifecycle configuration, as S3
// has it. Day counts are in lifecycle days (24 h unless configured
// shorter for tests); zero means the rule has no such action.
type LifecycleRule struct {
	ID      string `json:"id"`
	Enabled bool   `json:"enabled,omitempty"`
	// Prefix and Tags filter the keys the rule applies to (every tag
	// must match); LegacyPrefix records that the prefix was given as
	// the rule's top-level Prefix rather than in a Filter.
	Prefix       string         `json:"prefix,omitempty"`
	LegacyPrefix bool           `json:"legacy_prefix,omitempty"`
	Tags         []LifecycleTag `json:"tags,omitempty"`
	// SizeGreaterThan and SizeLessThan (bytes) filter by object size;
	// zero is no bound.
	SizeGreaterThan int64 `json:"size_greater_than,omitempty"`
	SizeLessThan    int64 `json:"size_less_than,omitempty"`
	// ExpirationDays and ExpirationDate expire current objects.
	ExpirationDays int       `json:"expiration_days,omitempty"`
	ExpirationDate time.Time `json:"expiration_date,omitzero"`
	// ExpiredObjectDeleteMarker removes a delete marker left with no
	// version under it; NoncurrentDays and NewerNoncurrentVersions
	// remove noncurrent versions (gateway/lifecycle_service.go).
	ExpiredObjectDeleteMarker bool `json:"expired_object_delete_marker,omitempty"`
	NoncurrentDays            int  `json:"noncurrent_days,omitempty"`
	NewerNoncurrentVersions   int  `json:"newer_noncurrent_versions,omitempty"`
	// AbortDays aborts multipart uploads that many days after they
	// were initiated.
	AbortDays int `json:"abort_days,omitempty"`
}

// LifecycleTag is one tag of a lifecycle rule's filter.
type LifecycleTag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ListEntry is one row of a shard server's listing: a key's current manifest
// summary (with its previous versions), or a common prefix when a delimiter
// was given.
type ListEntry struct {
	Key          string    `json:"key,omitempty"`
	Prefix       string    `json:"prefix,omitempty"` // set for a common prefix
	Version      Version   `json:"version"`
	Deleted      bool      `json:"deleted,omitempty"`
	Size         int64     `json:"size,omitempty"`
	ETag         string    `json:"etag,omitempty"`
	StorageClass string    `json:"storage_class,omitempty"`
	Modified     time.Time `json:"modified"`
	// Code lets a merging reader know how many copies confirm a version.
	Code string `json:"code,omitempty"`
	// VersionID is the manifest's VersionID (empty: the null version).
	VersionID string `json:"version_id,omitempty"`
	// Previous summarises the key's previous versions on this server (see
	// Store.Versions), newest first, so a merging reader counts them as
	// votes too: a failed overwrite must not hide the version it failed
	// to replace.
	Previous []ListEntry `json:"previous,omitempty"`
}
