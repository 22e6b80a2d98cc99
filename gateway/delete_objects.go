package gateway

import (
	"sync"

	"github.com/gofiber/fiber/v2"
)

// deleteParallelism bounds how many keys of one DeleteObjects request are
// deleted at once.
const deleteParallelism = 16

func (g *Gateway) deleteObjects(c *fiber.Ctx, req *request) error {
	var body DeleteObjectsRequest
	if err := DecodeXML(g.bodyReader(c, req, -1), &body); err != nil {
		return err
	}
	if err := body.Validate(); err != nil {
		return err
	}
	ctx, cancel := g.opContext()
	defer cancel()
	if _, err := g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
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
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
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
