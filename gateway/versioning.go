package gateway

import (
	"context"
	"encoding/xml"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Object versioning (docs/VERSIONING.md). A bucket's state lives in its
// record (metadata.Bucket.Versioning), which the gateway caches; every
// write in an Enabled bucket is marked Versioned and named by its
// Version, and the shard servers' confirm jobs keep the newest manifest
// of every version ID. Unversioned buckets take none of these paths.

// VersioningConfiguration is the body of Get/PutBucketVersioning. A
// bucket whose versioning was never set answers with no Status, as S3.
type VersioningConfiguration struct {
	XMLName   xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ VersioningConfiguration"`
	Status    string   `xml:"Status,omitempty"`
	MFADelete string   `xml:"MfaDelete,omitempty"`
}

// versioningInput is VersioningConfiguration as clients send it (with or
// without the namespace).
type versioningInput struct {
	Status    string `xml:"Status"`
	MFADelete string `xml:"MfaDelete"`
}

func (g *Gateway) bucketVersioning(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	if req.method == fiber.MethodPut {
		var in versioningInput
		if err := g.decodeXMLBody(c, req, &in); err != nil {
			return err
		}
		switch {
		case in.MFADelete == "Enabled":
			return apiErr("NotImplemented", "regen has no MFA delete")
		case in.MFADelete != "" && in.MFADelete != "Disabled":
			return apiErr("MalformedXML", "MfaDelete must be Enabled or Disabled")
		case in.Status != metadata.VersioningEnabled && in.Status != metadata.VersioningSuspended:
			// NB: S3 accepts no way back to unversioned; an empty or
			// unknown Status is malformed.
			return apiErr("MalformedXML", "Status must be Enabled or Suspended")
		}
		err := g.layer.updateBucket(ctx, g.buckets, req.bucket, func(b *metadata.Bucket) error {
			if b.ObjectLock && in.Status != metadata.VersioningEnabled {
				return apiErr("InvalidBucketState", "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.")
			}
			b.Versioning = in.Status
			return nil
		})
		if err != nil {
			return bucketErr(err)
		}
		c.Status(fiber.StatusOK)
		return nil
	}
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	return sendXML(c, fiber.StatusOK, VersioningConfiguration{Status: b.Versioning})
}

// versioningOf returns the versioning state of bucket from the cache
// (no round trip while it is fresh); "" when it cannot be read, which
// callers that already checked the bucket never see.
func (g *Gateway) versioningOf(ctx context.Context, bucket string) string {
	b, err := g.layer.bucket(ctx, g.buckets, bucket)
	if err != nil {
		return ""
	}
	return b.Versioning
}

// setVersionHeader sets x-amz-version-id for m in a bucket whose
// versioning state is state: nothing in a bucket never versioned, as S3.
func setVersionHeader(c *fiber.Ctx, state string, m *metadata.Manifest) {
	if state != "" {
		c.Set("x-amz-version-id", m.S3VersionID())
	}
}

// versionIDParam returns the request's ?versionId, "" when absent. In a
// bucket never versioned only "null" (the current version) exists, and
// any other ID is refused as S3 does.
func versionIDParam(req *request, state string) (string, bool, error) {
	vs, ok := req.query["versionId"]
	if !ok {
		return "", false, nil
	}
	if len(vs) != 1 || vs[0] == "" {
		return "", false, apiErr("InvalidArgument", "Version id cannot be the empty string")
	}
	id := vs[0]
	if id == metadata.NullVersionID {
		return id, state != "", nil
	}
	if _, err := metadata.ParseVersion(id); err != nil || state == "" {
		return "", false, apiErr("InvalidArgument", "Invalid version id specified")
	}
	return id, true, nil
}

// storedVersionID maps an S3 version ID to Manifest.VersionID ("null" is
// the empty ID).
func storedVersionID(id string) string {
	if id == metadata.NullVersionID {
		return ""
	}
	return id
}

// markerHeaders answers a request that met delete marker m: the marker
// flag, its version and, for a request by version ID, its date.
func markerHeaders(c *fiber.Ctx, m *metadata.Manifest, byID bool) {
	c.Set("x-amz-delete-marker", "true")
	c.Set("x-amz-version-id", m.S3VersionID())
	if byID {
		c.Set("Last-Modified", m.Modified.UTC().Format(http.TimeFormat))
	}
}

// readVersion is readManifest (head: readHead) of one version of a key
// in a versioned bucket. A delete marker comes back as a
// *deleteMarkerError.
func (g *Gateway) readVersion(ctx context.Context, bucket, key, id string, head bool) (*metadata.Manifest, error) {
	return g.layer.lookupWhere(ctx, bucket, key, !head, matchVersion(storedVersionID(id)))
}

// deleteInVersioned answers DELETE of an object in a bucket whose
// versioning is state (Enabled or Suspended): with a versionId, that
// version goes for good; without, a delete marker is written (a new
// version when Enabled, the null version when Suspended).
func (g *Gateway) deleteInVersioned(c *fiber.Ctx, req *request, b *metadata.Bucket) error {
	ctx, cancel := g.opContext()
	defer cancel()
	state := b.Versioning
	id, byID, err := versionIDParam(req, state)
	if err != nil {
		return err
	}
	if byID {
		guard, err := g.versionGuard(ctx, c, req, b, req.key)
		if err != nil {
			return err
		}
		m, err := g.layer.deleteVersionGuarded(ctx, req.bucket, req.key, storedVersionID(id), guard)
		if err != nil {
			return err
		}
		c.Set("x-amz-version-id", id)
		if m != nil && m.Deleted {
			c.Set("x-amz-delete-marker", "true")
		}
		c.Status(fiber.StatusNoContent)
		return nil
	}
	marker, err := g.writeDeleteMarker(ctx, req.bucket, req.key, state == metadata.VersioningEnabled)
	if err != nil {
		return err
	}
	c.Set("x-amz-delete-marker", "true")
	c.Set("x-amz-version-id", marker.S3VersionID())
	c.Status(fiber.StatusNoContent)
	return nil
}

// writeDeleteMarker writes a delete marker over the key's newest version
// (Versioned: a new version; otherwise the null version, which replaces
// the previous null one once confirmed), on a write quorum of that
// version's placement, or of a new placement when the key has none. As
// in S3 a marker is written whether or not the key has an object. It is
// fenced like any unconditional write: retried with a new version while
// servers refuse it.
func (g *Gateway) writeDeleteMarker(ctx context.Context, bucket, key string, versioned bool) (*metadata.Manifest, error) {
	var marker *metadata.Manifest
	err := g.layer.fenced(ctx, func() error {
		cur, err := g.layer.lookupWhere(ctx, bucket, key, false, nil)
		var dm *deleteMarkerError
		switch {
		case errors.As(err, &dm):
			cur = dm.m
		case errors.Is(err, errNotFound):
			cur = nil
		case err != nil:
			return err
		}
		if cur == nil {
			if cur, err = g.emptyPlacement(ctx, bucket, key); err != nil {
				return err
			}
		}
		marker = g.layer.tombstone(cur)
		marker.Versioned = versioned
		return g.layer.writeManifest(ctx, marker, marker.Placement, g.layer.writeQuorum(marker), shardrpc.NoLease)
	})
	return marker, err
}

// emptyPlacement is a manifest-shaped placement for a marker of a key
// that has no version: the bucket's code and the first n live servers of
// the key's order, as a PUT would take.
func (g *Gateway) emptyPlacement(ctx context.Context, bucket, key string) (*metadata.Manifest, error) {
	b, err := g.layer.bucket(ctx, g.buckets, bucket)
	if err != nil {
		return nil, bucketErr(err)
	}
	code, name, err := g.codeFor(b.Code, "")
	if err != nil {
		return nil, err
	}
	p := g.placeNew(placementKey(bucket, key), code.TotalShards())
	return &metadata.Manifest{Bucket: bucket, Key: key, Code: name, Placement: p}, nil
}

// namedVersion reads the version a sub-resource request (?tagging, ?acl,
// ?retention, ?legal-hold) names in bucket b: its versionId, else the
// current version; head leaves out inline data. Errors are S3's: 404
// NoSuchKey (no current version), NoSuchVersion (no such ID), 405 for a
// delete marker named by ID.
func (g *Gateway) namedVersion(ctx context.Context, req *request, b *metadata.Bucket) (*metadata.Manifest, bool, error) {
	id, byID, err := versionIDParam(req, b.Versioning)
	if err != nil {
		return nil, false, err
	}
	var m *metadata.Manifest
	if byID {
		m, err = g.readVersion(ctx, req.bucket, req.key, id, true)
	} else {
		m, err = g.layer.readHead(ctx, req.bucket, req.key)
	}
	return m, byID, versionErr(err, byID)
}

// updateNamed applies fn to the version a sub-resource PUT or DELETE
// names (namedVersion) and stores it as a newer manifest of that version
// (layer.updateVersion: under the key's lease, current or not).
func (g *Gateway) updateNamed(ctx context.Context, req *request, b *metadata.Bucket, fn func(*metadata.Manifest) error) (*metadata.Manifest, error) {
	want, byID, err := g.namedVersion(ctx, req, b)
	if err != nil {
		return nil, err
	}
	m, err := g.layer.updateVersion(ctx, req.bucket, req.key, want.VersionID, fn)
	return m, versionErr(err, byID)
}

// versionErr turns a lookup's answer for a version (by ID or the
// current one) into the S3 error: NoSuchVersion or NoSuchKey for an
// absent one, 405 MethodNotAllowed for a delete marker named by ID.
func versionErr(err error, byID bool) error {
	var dm *deleteMarkerError
	switch {
	case err == nil:
		return nil
	case byID && errors.As(err, &dm):
		return apiErr("MethodNotAllowed", "The specified method is not allowed against a delete marker.")
	case byID && errors.Is(err, errNotFound):
		return apiErr("NoSuchVersion", "The specified version does not exist.")
	case errors.Is(err, errNotFound):
		return apiErr("NoSuchKey", "The specified key does not exist.")
	}
	return err
}
