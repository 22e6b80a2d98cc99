package gateway

import (
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// deleteParallelism bounds how many keys of one DeleteObjects request are
// deleted at once.
const deleteParallelism = 16

func (g *Gateway) deleteObjects(c *fiber.Ctx, req *request) error {
	// NB: S3 requires Content-MD5 or an x-amz-checksum-* on DeleteObjects:
	// a corrupted key list would delete the wrong objects.
	raw, err := g.xmlBody(c, req, requiredDigests)
	if err != nil {
		return err
	}
	var body DeleteObjectsRequest
	if err := parseXML(raw, &body); err != nil {
		return err
	}
	if err := body.Validate(); err != nil {
		return err
	}
	ctx, cancel := g.opContext()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	cancel()
	if err != nil {
		return bucketErr(err)
	}
	if b.Versioning != "" {
		return g.deleteObjectsVersioned(c, req, &b, body)
	}
	errs := make([]error, len(body.Objects))
	var keys []string
	var at []int // keys[j] is body.Objects[at[j]]
	for i, o := range body.Objects {
		switch {
		case len(o.Key) > maxKeyLen:
			errs[i] = apiErr("KeyTooLongError", "Your key is too long")
			continue
		case o.VersionID != "" && o.VersionID != "null":
			errs[i] = apiErr("NoSuchVersion", "The specified version does not exist.")
			continue
		}
		if err := g.keyAllowed(c, req, &b, o.Key); err != nil {
			errs[i] = err
			continue
		}
		keys = append(keys, o.Key)
		at = append(at, i)
	}
	// NB: the batched lookup and tombstone writes get one operation's
	// time; the keys they leave undecided get one each (deleteKeys), so
	// under load the keys past the deadline do not all fail with
	// SlowDown while clients that ignore per-key errors (s3cmd) go on as
	// if the prefix were gone.
	bctx, cancel := g.opContext()
	for j, err := range g.deleteKeys(bctx, req.bucket, keys) {
		errs[at[j]] = err
	}
	cancel()
	out := DeleteResult{}
	for i, o := range body.Objects {
		if errs[i] != nil {
			ae := toS3(errs[i])
			out.Errors = append(out.Errors, DeleteError{Key: o.Key, VersionID: o.VersionID, Code: ae.Code, Message: ae.Message})
			continue
		}
		if !body.Quiet {
			out.Deleted = append(out.Deleted, DeletedObject{Key: o.Key, VersionID: o.VersionID})
		}
	}
	return sendXML(c, fiber.StatusOK, out)
}

// deleteObjectsVersioned is DeleteObjects in a versioned or suspended
// bucket. The entries without a version ID add delete markers, batched
// per shard server as the unversioned path batches tombstones
// (deleteMarkers); each entry naming a version is a removal of its own
// (it takes the key's lease and checks object lock), deleteParallelism
// at a time, beside the batch.
func (g *Gateway) deleteObjectsVersioned(c *fiber.Ctx, req *request, b *metadata.Bucket, body DeleteObjectsRequest) error {
	out := DeleteResult{}
	results := make([]DeletedObject, len(body.Objects))
	errs := make([]error, len(body.Objects))
	sem := make(chan struct{}, deleteParallelism)
	var wg sync.WaitGroup
	var markKeys []string
	var markAt []int // markKeys[j] is body.Objects[markAt[j]]
	for i, o := range body.Objects {
		switch {
		case len(o.Key) > maxKeyLen:
			errs[i] = apiErr("KeyTooLongError", "Your key is too long")
			continue
		case o.VersionID != "" && o.VersionID != metadata.NullVersionID:
			if _, err := metadata.ParseVersion(o.VersionID); err != nil {
				errs[i] = apiErr("NoSuchVersion", "The specified version does not exist.")
				continue
			}
		}
		action := "s3:DeleteObject"
		if o.VersionID != "" {
			action = "s3:DeleteObjectVersion"
		}
		if err := g.keyActionAllowed(c, req, b, o.Key, action); err != nil {
			errs[i] = err
			continue
		}
		if o.VersionID == "" {
			markKeys = append(markKeys, o.Key)
			markAt = append(markAt, i)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := g.opContext()
			defer cancel()
			res := DeletedObject{Key: o.Key, VersionID: o.VersionID}
			guard, err := g.versionGuard(ctx, c, req, b, o.Key)
			if err != nil {
				results[i], errs[i] = res, err
				return
			}
			m, err := g.layer.deleteVersionGuarded(ctx, req.bucket, o.Key, storedVersionID(o.VersionID), guard)
			if m != nil && m.Deleted {
				res.DeleteMarker, res.DeleteMarkerVersionID = true, o.VersionID
			}
			results[i], errs[i] = res, err
		}()
	}
	if len(markKeys) > 0 {
		// NB: as in deleteObjects, the batch gets one operation's time
		// and the keys it leaves undecided one each.
		ctx, cancel := g.opContext()
		merrs, marks := g.deleteMarkers(ctx, req.bucket, markKeys, b.Versioning == metadata.VersioningEnabled)
		cancel()
		for j, i := range markAt {
			results[i], errs[i] = DeletedObject{Key: body.Objects[i].Key}, merrs[j]
			if merrs[j] == nil {
				results[i].DeleteMarker, results[i].DeleteMarkerVersionID = true, marks[j].S3VersionID()
			}
		}
	}
	wg.Wait()
	for i, o := range body.Objects {
		if errs[i] != nil {
			ae := toS3(errs[i])
			out.Errors = append(out.Errors, DeleteError{Key: o.Key, VersionID: o.VersionID, Code: ae.Code, Message: ae.Message})
			continue
		}
		if !body.Quiet {
			out.Deleted = append(out.Deleted, results[i])
		}
	}
	return sendXML(c, fiber.StatusOK, out)
}
