package gateway

import (
	"encoding/xml"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// Tags on objects and buckets, with S3's limits: at most 10 tags per
// object (50 per bucket), keys of 1 to 128 characters, values of up to 256,
// made of letters, digits, spaces and + - = . _ : / @, no key twice, and
// none starting with the reserved "aws:".

const (
	maxObjectTags  = 10
	maxBucketTags  = 50
	maxTagKeyLen   = 128
	maxTagValueLen = 256
)

// Tagging is the body of Put/GetObjectTagging and Put/GetBucketTagging.
type Tagging struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ Tagging"`
	TagSet  []Tag    `xml:"TagSet>Tag"`
}

// Tag is one tag of a Tagging.
type Tag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// taggingInput is a Tagging body as clients send it (with or without the
// namespace).
type taggingInput struct {
	XMLName xml.Name `xml:"Tagging"`
	TagSet  []struct {
		Key   *string `xml:"Key"`
		Value *string `xml:"Value"`
	} `xml:"TagSet>Tag"`
}

// validTagText reports whether s is made only of the characters S3
// allows in tags.
func validTagText(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsNumber(r) && r != ' ' && !strings.ContainsRune("+-=._:/@", r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// checkTag applies S3's rules to one tag.
func checkTag(k, v string) error {
	switch {
	case k == "" || utf8.RuneCountInString(k) > maxTagKeyLen:
		return apiErr("InvalidTag", fmt.Sprintf("The TagKey you have provided is invalid: it must be 1 to %d characters", maxTagKeyLen))
	case utf8.RuneCountInString(v) > maxTagValueLen:
		return apiErr("InvalidTag", fmt.Sprintf("The TagValue you have provided is too long: at most %d characters", maxTagValueLen))
	case strings.HasPrefix(strings.ToLower(k), "aws:"):
		return apiErr("InvalidTag", "Your TagKey cannot be prefixed with aws:")
	case !validTagText(k) || !validTagText(v):
		return apiErr("InvalidTag", "The TagKey or TagValue you have provided has characters other than letters, digits, spaces and + - = . _ : / @")
	}
	return nil
}

// tagsFromXML reads and checks a Tagging body; limit is 10 for objects,
// 50 for buckets.
func tagsFromXML(in *taggingInput, limit int, what string) (map[string]string, error) {
	if len(in.TagSet) > limit {
		return nil, apiErr("BadRequest", fmt.Sprintf("%s tags cannot be greater than %d", what, limit))
	}
	tags := make(map[string]string, len(in.TagSet))
	for _, t := range in.TagSet {
		if t.Key == nil || t.Value == nil {
			return nil, apiErr("MalformedXML", "Every Tag needs a Key and a Value")
		}
		if _, dup := tags[*t.Key]; dup {
			return nil, apiErr("InvalidTag", "Cannot provide multiple Tags with the same key")
		}
		if err := checkTag(*t.Key, *t.Value); err != nil {
			return nil, err
		}
		tags[*t.Key] = *t.Value
	}
	return tags, nil
}

// tagsFromHeader reads x-amz-tagging: URL query encoded, "k1=v1&k2=v2".
// Absent or empty gives no tags.
func tagsFromHeader(h string) (map[string]string, error) {
	if h == "" {
		return nil, nil
	}
	bad := apiErr("InvalidArgument", "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.")
	q, err := url.ParseQuery(h)
	if err != nil {
		return nil, bad
	}
	if len(q) > maxObjectTags {
		return nil, apiErr("BadRequest", fmt.Sprintf("Object tags cannot be greater than %d", maxObjectTags))
	}
	tags := make(map[string]string, len(q))
	for k, vs := range q {
		if len(vs) != 1 {
			return nil, bad
		}
		if err := checkTag(k, vs[0]); err != nil {
			return nil, err
		}
		tags[k] = vs[0]
	}
	return tags, nil
}

// taggingOf renders tags sorted by key.
func taggingOf(tags map[string]string) Tagging {
	out := Tagging{TagSet: []Tag{}}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out.TagSet = append(out.TagSet, Tag{Key: k, Value: tags[k]})
	}
	return out
}

// setTaggingCount sends x-amz-tagging-count on GET and HEAD of a tagged
// object.
func setTaggingCount(c *fiber.Ctx, m *metadata.Manifest) {
	if len(m.Tags) > 0 {
		c.Set("x-amz-tagging-count", strconv.Itoa(len(m.Tags)))
	}
}

// objectTagging answers Get/Put/DeleteObjectTagging of the version the
// request names (its versionId, else the current version). Put and
// Delete replace that version's tags and leave its data as it is
// (layer.updateVersion).
func (g *Gateway) objectTagging(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	var tags map[string]string
	switch req.method {
	case fiber.MethodGet:
		m, _, err := g.namedVersion(ctx, req, &b)
		if err != nil {
			return err
		}
		setVersionHeader(c, b.Versioning, m)
		return sendXML(c, fiber.StatusOK, taggingOf(m.Tags))
	case fiber.MethodPut:
		var in taggingInput
		if err := g.decodeXMLBody(c, req, &in); err != nil {
			return err
		}
		if tags, err = tagsFromXML(&in, maxObjectTags, "Object"); err != nil {
			return err
		}
	case fiber.MethodDelete:
	default:
		return apiErr("MethodNotAllowed", "")
	}
	m, err := g.updateNamed(ctx, req, &b, func(m *metadata.Manifest) error {
		m.Tags = tags
		return nil
	})
	if err != nil {
		return err
	}
	setVersionHeader(c, b.Versioning, m)
	if req.method == fiber.MethodDelete {
		c.Status(fiber.StatusNoContent)
	} else {
		c.Status(fiber.StatusOK)
	}
	return nil
}

// bucketTagging answers Get/Put/DeleteBucketTagging.
func (g *Gateway) bucketTagging(c *fiber.Ctx, req *request) error {
	ctx, cancel := g.opContext()
	defer cancel()
	switch req.method {
	case fiber.MethodGet:
		b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
		if err != nil {
			return bucketErr(err)
		}
		if len(b.Tags) == 0 {
			return apiErr("NoSuchTagSet", "")
		}
		return sendXML(c, fiber.StatusOK, taggingOf(b.Tags))
	case fiber.MethodPut:
		var in taggingInput
		if err := g.decodeXMLBody(c, req, &in); err != nil {
			return err
		}
		tags, err := tagsFromXML(&in, maxBucketTags, "Bucket")
		if err != nil {
			return err
		}
		return g.setBucketConfig(c, req, fiber.StatusNoContent, func(b *metadata.Bucket) { b.Tags = tags })
	case fiber.MethodDelete:
		return g.setBucketConfig(c, req, fiber.StatusNoContent, func(b *metadata.Bucket) { b.Tags = nil })
	}
	return apiErr("MethodNotAllowed", "")
}
