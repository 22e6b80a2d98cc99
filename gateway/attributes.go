package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// objectAttributes are the names x-amz-object-attributes may list.
var objectAttributes = map[string]bool{"ETag": true, "Checksum": true, "ObjectParts": true, "StorageClass": true, "ObjectSize": true}

// getObjectAttributes answers GetObjectAttributes: the attributes named in
// x-amz-object-attributes, without the object's data. ObjectParts is
// paged by x-amz-max-parts and x-amz-part-number-marker and is only
// reported for multipart objects, as S3 does.
func (g *Gateway) getObjectAttributes(c *fiber.Ctx, req *request) error {
	want := map[string]bool{}
	c.Request().Header.VisitAll(func(k, v []byte) {
		if !strings.EqualFold(string(k), "x-amz-object-attributes") {
			return
		}
		for _, a := range strings.Split(string(v), ",") {
			if a = strings.TrimSpace(a); a != "" {
				want[a] = true
			}
		}
	})
	if len(want) == 0 {
		return apiErr("InvalidArgument", "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty")
	}
	for a := range want {
		if !objectAttributes[a] {
			return apiErr("InvalidArgument", "Invalid attribute name specified: "+a)
		}
	}
	maxParts, marker := 1000, 0
	if v := c.Get("x-amz-max-parts"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apiErr("InvalidArgument", "x-amz-max-parts must be a non-negative integer")
		}
		maxParts = min(n, 1000)
	}
	if v := c.Get("x-amz-part-number-marker"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return apiErr("InvalidArgument", "x-amz-part-number-marker must be a non-negative integer")
		}
		marker = n
	}
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	id, byID, err := versionIDParam(req, b.Versioning)
	if err != nil {
		return err
	}
	var m *metadata.Manifest
	if byID {
		m, err = g.readVersion(ctx, req.bucket, req.key, id, true)
	} else {
		m, err = g.layer.readHead(ctx, req.bucket, req.key)
	}
	if dm := (*deleteMarkerError)(nil); byID && errors.As(err, &dm) {
		markerHeaders(c, dm.m, true)
		return apiErr("MethodNotAllowed", "The specified method is not allowed against this resource.")
	}
	if errors.Is(err, errNotFound) {
		if byID {
			return apiErr("NoSuchVersion", "The specified version does not exist.")
		}
		return apiErr("NoSuchKey", "The specified key does not exist.")
	}
	if err != nil {
		return err
	}
	setVersionHeader(c, b.Versioning, m)
	if m.SSE != nil && m.SSE.Customer {
		// As S3: the attributes of an SSE-C object need its key.
		if _, err := g.sealerFor(c, m.SSE, objectSSE); err != nil {
			return err
		}
	}
	multipart := isMultipart(m)
	var out GetObjectAttributesResponse
	if want["ETag"] {
		out.ETag = m.ETag
	}
	if want["StorageClass"] {
		out.StorageClass = m.StorageClass
		if out.StorageClass == "" {
			out.StorageClass = "STANDARD"
		}
	}
	if want["ObjectSize"] {
		size := m.Size
		out.ObjectSize = &size
	}
	if want["Checksum"] && len(m.Checksums) > 0 {
		// A multipart object's checksum is a checksum of its parts'
		// checksums; the headers carry it with a "-N" suffix, this
		// document without, beside its type.
		sums := map[string]string{}
		for algo, v := range m.Checksums {
			sums[algo], _, _ = strings.Cut(v, "-")
		}
		out.Checksum = &AttributesChecksum{Checksums: checksumsXML(sums), ChecksumType: "FULL_OBJECT"}
		if multipart {
			out.Checksum.ChecksumType = "COMPOSITE"
		}
	}
	if want["ObjectParts"] && multipart {
		op := &AttributesObjectParts{PartsCount: len(m.Parts), PartNumberMarker: marker, MaxParts: maxParts}
		for i, p := range m.Parts {
			num := i + 1 // parts are numbered in the order of the completed object
			if num <= marker {
				continue
			}
			if len(op.Parts) == maxParts {
				op.IsTruncated = true
				break
			}
			op.Parts = append(op.Parts, AttributesPart{PartNumber: num, Size: partPlainSize(p), Checksums: checksumsXML(p.Checksums)})
			op.NextPartNumberMarker = num
		}
		out.ObjectParts = op
	}
	c.Set("Last-Modified", m.Modified.UTC().Format(http.TimeFormat))
	return sendXML(c, fiber.StatusOK, out)
}
