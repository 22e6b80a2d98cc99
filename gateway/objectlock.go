package gateway

import (
	"context"
	"encoding/xml"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// S3 Object Lock (docs/OBJECTLOCK.md). A bucket created with object lock
// is versioned for good; each version carries its retention and legal
// hold in its manifest (metadata.Lock), so they are replicated, voted on
// and repaired with the version. The rules that decide whether a version
// may go (removable) and whether its retention may change
// (changeRetention) are pure functions of the lock, the clock and the
// request's bypass; every route that removes a version by ID asks
// removable first (deleteVersionGuarded).

const (
	hdrLockMode       = "x-amz-object-lock-mode"
	hdrLockUntil      = "x-amz-object-lock-retain-until-date"
	hdrLockLegalHold  = "x-amz-object-lock-legal-hold"
	hdrBucketLock     = "x-amz-bucket-object-lock-enabled"
	hdrBypassRetained = "x-amz-bypass-governance-retention"

	// lockTimeFormat is how S3 writes retain-until dates (ISO 8601,
	// milliseconds, UTC). Dates are stored at that precision, so what
	// a client reads back is what it compares with.
	lockTimeFormat = "2006-01-02T15:04:05.000Z"
)

// NB: functions, not variables: apiErr reads the error table, which
// package initialisation may not have filled yet.
func errLockedVersion() error {
	return apiErr("AccessDenied", "Access Denied because object protected by object lock.")
}

func errNoBucketLock() error {
	return apiErr("InvalidRequest", "Bucket is missing Object Lock Configuration")
}

// ObjectLockConfiguration is the body of Get/PutObjectLockConfiguration.
type ObjectLockConfiguration struct {
	XMLName           xml.Name        `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ObjectLockConfiguration"`
	ObjectLockEnabled string          `xml:"ObjectLockEnabled,omitempty"`
	Rule              *ObjectLockRule `xml:"Rule,omitempty"`
}

// ObjectLockRule is a bucket's default retention.
type ObjectLockRule struct {
	DefaultRetention DefaultRetention `xml:"DefaultRetention"`
}

// DefaultRetention is the retention of new versions that name none:
// Mode for Days or Years (one of them).
type DefaultRetention struct {
	Mode  string `xml:"Mode"`
	Days  int    `xml:"Days,omitempty"`
	Years int    `xml:"Years,omitempty"`
}

// objectLockInput is ObjectLockConfiguration as clients send it.
type objectLockInput struct {
	ObjectLockEnabled string `xml:"ObjectLockEnabled"`
	Rule              *struct {
		DefaultRetention *struct {
			Mode  string `xml:"Mode"`
			Days  *int   `xml:"Days"`
			Years *int   `xml:"Years"`
		} `xml:"DefaultRetention"`
	} `xml:"Rule"`
}

// Retention is the body of Get/PutObjectRetention.
type Retention struct {
	XMLName         xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ Retention"`
	Mode            string   `xml:"Mode,omitempty"`
	RetainUntilDate string   `xml:"RetainUntilDate,omitempty"`
}

// retentionInput is Retention as clients send it.
type retentionInput struct {
	Mode            string `xml:"Mode"`
	RetainUntilDate string `xml:"RetainUntilDate"`
}

// ObjectLegalHold is the body of Get/PutObjectLegalHold.
type ObjectLegalHold struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LegalHold"`
	Status  string   `xml:"Status"`
}

// legalHoldInput is ObjectLegalHold as clients send it.
type legalHoldInput struct {
	Status string `xml:"Status"`
}

func validLockMode(m string) bool {
	return m == metadata.LockGovernance || m == metadata.LockCompliance
}

// parseLockTime reads a retain-until date (ISO 8601, as S3 takes it).
func parseLockTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, apiErr("InvalidArgument", "The retain until date must be provided in ISO 8601 format")
	}
	return t.UTC().Truncate(time.Millisecond), nil
}

// lockFromHeaders reads the x-amz-object-lock-* headers of a write: nil
// when it sends none. Mode and date come together or not at all, and the
// date must be in the future, as in S3.
func lockFromHeaders(c *fiber.Ctx, now time.Time) (*metadata.Lock, error) {
	mode, until, hold := c.Get(hdrLockMode), c.Get(hdrLockUntil), c.Get(hdrLockLegalHold)
	if mode == "" && until == "" && hold == "" {
		return nil, nil
	}
	l := &metadata.Lock{}
	switch {
	case (mode == "") != (until == ""):
		return nil, apiErr("InvalidArgument", "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied")
	case mode != "":
		if !validLockMode(mode) {
			return nil, apiErr("InvalidArgument", "Unknown wormMode directive.")
		}
		t, err := parseLockTime(until)
		if err != nil {
			return nil, err
		}
		if !t.After(now) {
			return nil, apiErr("InvalidArgument", "The retain until date must be in the future!")
		}
		l.Mode, l.RetainUntil = mode, t
	}
	switch hold {
	case "", "OFF":
	case "ON":
		l.LegalHold = true
	default:
		return nil, apiErr("InvalidArgument", "Legal Hold must be either of 'ON' or 'OFF'")
	}
	return l, nil
}

// lockDigestRequired refuses a PutObject that asks for a lock (asked,
// from lockFromHeaders) without a digest of its body, as S3 does: a
// Content-MD5, an x-amz-checksum-* value, or one announced for a
// trailer (x-amz-trailer, x-amz-sdk-checksum-algorithm).
func lockDigestRequired(c *fiber.Ctx, asked *metadata.Lock) error {
	if asked == nil || c.Get("Content-MD5") != "" || c.Get("x-amz-trailer") != "" ||
		c.Get("x-amz-sdk-checksum-algorithm") != "" || headerWithPrefix(c, "x-amz-checksum-") != "" {
		return nil
	}
	return apiErr("InvalidRequest", "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests with Object Lock parameters")
}

// applyBucketLock decides the lock of a new version m of bucket b: what
// the request asked (asked, nil for nothing), else the bucket's default
// retention from now. Asking for a lock in a bucket without object lock
// is refused, as in S3.
func applyBucketLock(b *metadata.Bucket, m *metadata.Manifest, asked *metadata.Lock, now time.Time) error {
	if asked != nil && !b.ObjectLock {
		return errNoBucketLock()
	}
	l := metadata.Lock{}
	if asked != nil {
		l = *asked
	}
	if l.Mode == "" && b.ObjectLock && b.LockDefault != nil {
		l.Mode = b.LockDefault.Mode
		l.RetainUntil = b.LockDefault.Until(now).UTC().Truncate(time.Millisecond)
	}
	m.Lock = normalLock(l)
	return nil
}

// normalLock is l as stored: nil when it holds nothing.
func normalLock(l metadata.Lock) *metadata.Lock {
	if l == (metadata.Lock{}) {
		return nil
	}
	return &l
}

// setLockHeaders answers GET and HEAD of a version with its lock.
func setLockHeaders(c *fiber.Ctx, m *metadata.Manifest) {
	if m.Lock == nil {
		return
	}
	if m.Lock.Mode != "" {
		c.Set(hdrLockMode, m.Lock.Mode)
		c.Set(hdrLockUntil, m.Lock.RetainUntil.UTC().Format(lockTimeFormat))
	}
	if m.Lock.LegalHold {
		c.Set(hdrLockLegalHold, "ON")
	} else {
		c.Set(hdrLockLegalHold, "OFF")
	}
}

// removable decides whether a version locked by l may be removed at now:
// never under a legal hold or an unexpired COMPLIANCE retention; under
// an unexpired GOVERNANCE retention only with bypass (the header and the
// caller's owner right, bypassAllowed).
func removable(l *metadata.Lock, now time.Time, bypass bool) error {
	if l.Protects(now, bypass) {
		return errLockedVersion()
	}
	return nil
}

// changeRetention sets the retention of l to mode until (both empty:
// none), as PutObjectRetention asks at now. A retention in force may
// always be kept or extended in its mode; shortened, removed or changed
// in mode only when it is GOVERNANCE and the request bypasses it, never
// when it is COMPLIANCE. An expired one no longer binds.
func changeRetention(l *metadata.Lock, mode string, until, now time.Time, bypass bool) error {
	if mode != "" && !until.After(now) {
		return apiErr("InvalidArgument", "The retain until date must be in the future!")
	}
	inForce := l.Mode != "" && now.Before(l.RetainUntil)
	keeps := mode == l.Mode && !until.Before(l.RetainUntil)
	switch {
	case !inForce, keeps:
	case l.Mode == metadata.LockGovernance && bypass:
	default:
		return errLockedVersion()
	}
	l.Mode, l.RetainUntil = mode, until
	return nil
}

// bypassAllowed reports whether the request bypasses GOVERNANCE
// retention on key: it sends x-amz-bypass-governance-retention: true and
// its caller is the bucket's owner or an administrator (S3's
// s3:BypassGovernanceRetention, which a bucket policy may deny).
func (g *Gateway) bypassAllowed(ctx context.Context, c *fiber.Ctx, req *request, b *metadata.Bucket, key string) (bool, error) {
	if !strings.EqualFold(c.Get(hdrBypassRetained), "true") || req.anonymous {
		return false, nil
	}
	return g.allowedOn(ctx, c, req, b, "s3:BypassGovernanceRetention", key, true, needOwner)
}

// versionGuard returns the check a removal of a version by ID in bucket
// b makes (deleteVersionGuarded): nil for a bucket without object lock.
// The shard servers apply the same rule with the same bypass on their
// own (metadata.Lock.Protects).
func (g *Gateway) versionGuard(ctx context.Context, c *fiber.Ctx, req *request, b *metadata.Bucket, key string) (*removalGuard, error) {
	if !b.ObjectLock {
		return nil, nil
	}
	bypass, err := g.bypassAllowed(ctx, c, req, b, key)
	if err != nil {
		return nil, err
	}
	return &removalGuard{check: func(m *metadata.Manifest) error { return removable(m.Lock, time.Now(), bypass) }, bypass: bypass}, nil
}

// bucketObjectLock answers Get/PutObjectLockConfiguration. Object lock
// is chosen when a bucket is created (x-amz-bucket-object-lock-enabled),
// or turned on later for a bucket whose versioning is Enabled, as S3
// allows (for good: its versioning can then never be suspended); this
// also sets or clears its default retention.
func (g *Gateway) bucketObjectLock(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	if req.method == fiber.MethodGet {
		b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
		if err != nil {
			return bucketErr(err)
		}
		if !b.ObjectLock {
			return apiErr("ObjectLockConfigurationNotFoundError", "")
		}
		out := ObjectLockConfiguration{ObjectLockEnabled: "Enabled"}
		if r := b.LockDefault; r != nil {
			out.Rule = &ObjectLockRule{DefaultRetention{Mode: r.Mode, Days: r.Days, Years: r.Years}}
		}
		return sendXML(c, fiber.StatusOK, out)
	}
	var in objectLockInput
	if err := g.decodeXMLBody(c, req, &in); err != nil {
		return err
	}
	rule, err := lockRuleOf(&in)
	if err != nil {
		return err
	}
	err = g.layer.updateBucket(ctx, g.buckets, req.bucket, func(b *metadata.Bucket) error {
		return enableBucketLock(b, rule)
	})
	if err != nil {
		return bucketErr(err)
	}
	c.Status(fiber.StatusOK)
	return nil
}

// enableBucketLock applies PutObjectLockConfiguration to b: object lock
// on (for good) with default retention rule (nil: none). A bucket
// without object lock takes it only while its versioning is Enabled:
// an unversioned or suspended bucket has null versions, which a write
// replaces, so nothing could be kept (S3's InvalidBucketState).
// PutBucketVersioning Suspended is refused from then on; both run under
// the bucket record's lease, so neither slips between the other's check
// and write.
func enableBucketLock(b *metadata.Bucket, rule *metadata.LockRule) error {
	if !b.ObjectLock && b.Versioning != metadata.VersioningEnabled {
		return apiErr("InvalidBucketState", "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration")
	}
	b.ObjectLock, b.LockDefault = true, rule
	return nil
}

// lockRuleOf checks an ObjectLockConfiguration body and returns its
// default retention (nil: none).
func lockRuleOf(in *objectLockInput) (*metadata.LockRule, error) {
	if in.ObjectLockEnabled != "Enabled" {
		return nil, apiErr("MalformedXML", "ObjectLockEnabled must be Enabled")
	}
	if in.Rule == nil {
		return nil, nil
	}
	d := in.Rule.DefaultRetention
	switch {
	case d == nil:
		return nil, apiErr("MalformedXML", "A Rule needs a DefaultRetention")
	case !validLockMode(d.Mode):
		return nil, apiErr("MalformedXML", "DefaultRetention Mode must be GOVERNANCE or COMPLIANCE")
	case (d.Days == nil) == (d.Years == nil):
		return nil, apiErr("MalformedXML", "DefaultRetention needs either Days or Years, not both")
	}
	r := &metadata.LockRule{Mode: d.Mode}
	switch {
	case d.Days != nil && (*d.Days <= 0 || *d.Days > 36500):
		return nil, apiErr("InvalidArgument", "Default retention period must be a positive integer value (at most 36500 days)")
	case d.Years != nil && (*d.Years <= 0 || *d.Years > 100):
		return nil, apiErr("InvalidArgument", "Default retention period must be a positive integer value (at most 100 years)")
	case d.Days != nil:
		r.Days = *d.Days
	default:
		r.Years = *d.Years
	}
	return r, nil
}

// objectLockSub answers GET and PUT of a version's ?retention or
// ?legal-hold (its versionId, else the current version) in a bucket with
// object lock: show renders the version's lock for GET (nil: none);
// change reads a PUT's body and returns what to do to the lock, which is
// then stored in a newer manifest of that version (updateNamed, under
// the key's lease).
func (g *Gateway) objectLockSub(c *fiber.Ctx, req *request,
	show func(*metadata.Lock) (any, error),
	change func(context.Context, *metadata.Bucket) (func(*metadata.Lock) error, error)) error {
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	if !b.ObjectLock {
		return errNoBucketLock()
	}
	if req.method == fiber.MethodGet {
		m, _, err := g.namedVersion(ctx, req, &b)
		if err != nil {
			return err
		}
		out, err := show(m.Lock)
		if err != nil {
			return err
		}
		return sendXML(c, fiber.StatusOK, out)
	}
	fn, err := change(ctx, &b)
	if err != nil {
		return err
	}
	_, err = g.updateNamed(ctx, req, &b, func(m *metadata.Manifest) error {
		l := metadata.Lock{}
		if m.Lock != nil {
			l = *m.Lock
		}
		if err := fn(&l); err != nil {
			return err
		}
		m.Lock = normalLock(l)
		return nil
	})
	if err != nil {
		return err
	}
	c.Status(fiber.StatusOK)
	return nil
}

// objectRetention answers Get/PutObjectRetention.
func (g *Gateway) objectRetention(c *fiber.Ctx, req *request) error {
	show := func(l *metadata.Lock) (any, error) {
		if l == nil || l.Mode == "" {
			return nil, apiErr("NoSuchObjectLockConfiguration", "")
		}
		return Retention{Mode: l.Mode, RetainUntilDate: l.RetainUntil.UTC().Format(lockTimeFormat)}, nil
	}
	change := func(ctx context.Context, b *metadata.Bucket) (func(*metadata.Lock) error, error) {
		var in retentionInput
		if err := g.decodeXMLBody(c, req, &in); err != nil {
			return nil, err
		}
		var until time.Time
		var err error
		switch {
		case in.Mode == "" && in.RetainUntilDate == "":
			// An empty Retention removes it (a GOVERNANCE one with bypass).
		case in.Mode == "" || in.RetainUntilDate == "":
			return nil, apiErr("MalformedXML", "Retention needs both Mode and RetainUntilDate")
		case !validLockMode(in.Mode):
			return nil, apiErr("MalformedXML", "Retention Mode must be GOVERNANCE or COMPLIANCE")
		default:
			if until, err = parseLockTime(in.RetainUntilDate); err != nil {
				return nil, err
			}
		}
		bypass, err := g.bypassAllowed(ctx, c, req, b, req.key)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		return func(l *metadata.Lock) error { return changeRetention(l, in.Mode, until, now, bypass) }, nil
	}
	return g.objectLockSub(c, req, show, change)
}

// objectLegalHold answers Get/PutObjectLegalHold.
func (g *Gateway) objectLegalHold(c *fiber.Ctx, req *request) error {
	show := func(l *metadata.Lock) (any, error) {
		if l != nil && l.LegalHold {
			return ObjectLegalHold{Status: "ON"}, nil
		}
		return ObjectLegalHold{Status: "OFF"}, nil
	}
	change := func(context.Context, *metadata.Bucket) (func(*metadata.Lock) error, error) {
		var in legalHoldInput
		if err := g.decodeXMLBody(c, req, &in); err != nil {
			return nil, err
		}
		if in.Status != "ON" && in.Status != "OFF" {
			return nil, apiErr("MalformedXML", "LegalHold Status must be ON or OFF")
		}
		return func(l *metadata.Lock) error { l.LegalHold = in.Status == "ON"; return nil }, nil
	}
	return g.objectLockSub(c, req, show, change)
}
