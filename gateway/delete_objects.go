package gateway

import (
	"sync"

	"github.com/gofiber/fiber/v2"
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
	errs := make([]error, len(body.Objects))
	sem := make(chan struct{}, deleteParallelism)
	var wg sync.WaitGroup
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
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// NB: each key has its own deadline. A request may name 1000
			// keys, each a manifest read and a tombstone write on its
			// placement; under load they do not all fit in one operation's
			// time, and the keys past it would fail with SlowDown while
			// clients that ignore per-key errors (s3cmd) go on as if the
			// prefix were gone.
			ctx, cancel := g.opContext()
			defer cancel()
			errs[i] = g.deleteKey(ctx, req.bucket, o.Key)
		})
	}
	wg.Wait()
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
