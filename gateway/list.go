package gateway

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/regen-s3/regen/metadata"
)

// listArgs parses the arguments shared by ListObjects V1 and V2.
func listArgs(req *request) (prefix, delim string, maxKeys int, encode bool, err error) {
	q := req.query
	prefix, delim = q.Get("prefix"), q.Get("delimiter")
	maxKeys = 1000
	if v := q.Get("max-keys"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 {
			return "", "", 0, false, apiErr("InvalidArgument", "max-keys must be a non-negative integer")
		}
		maxKeys = min(n, 1000)
	}
	switch q.Get("encoding-type") {
	case "":
	case "url":
		encode = true
	default:
		return "", "", 0, false, apiErr("InvalidArgument", "Invalid Encoding Method specified in Request")
	}
	return prefix, delim, maxKeys, encode, nil
}

// s3Escape URL-encodes a name for encoding-type=url as S3 does: every
// byte but the unreserved characters and '/' is percent-encoded (a space
// as %20, '+' as %2B), so that both decoders clients use, unquote_plus
// (botocore) and path unescaping (the Go SDKs), give the name back.
func s3Escape(s string, on bool) string {
	if !on {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9',
			ch == '-', ch == '_', ch == '.', ch == '~', ch == '/':
			b.WriteByte(ch)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[ch>>4])
			b.WriteByte(hex[ch&15])
		}
	}
	return b.String()
}

func (g *Gateway) listObjectsV2(c *fiber.Ctx, req *request) error {
	prefix, delim, maxKeys, encode, err := listArgs(req)
	if err != nil {
		return err
	}
	q := req.query
	after := q.Get("start-after")
	token := q.Get("continuation-token")
	if q.Has("continuation-token") {
		raw, derr := base64.RawURLEncoding.DecodeString(token)
		if derr != nil || len(raw) == 0 {
			return apiErr("InvalidArgument", "The continuation token provided is incorrect")
		}
		after = max(after, string(raw))
	}
	res, err := g.runList(req, prefix, delim, after, maxKeys)
	if err != nil {
		return err
	}
	out := ListObjectsV2Output{
		Name: req.bucket, Prefix: s3Escape(prefix, encode), Delimiter: s3Escape(delim, encode),
		MaxKeys: maxKeys, KeyCount: len(res.Objects) + len(res.Prefixes), IsTruncated: res.Truncated,
		ContinuationToken: token, StartAfter: s3Escape(q.Get("start-after"), encode),
	}
	if encode {
		out.EncodingType = "url"
	}
	if res.Truncated {
		out.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(res.Last))
	}
	fetchOwner := q.Get("fetch-owner") == "true"
	for _, e := range res.Objects {
		obj := g.listObject(e, encode)
		if fetchOwner {
			obj.Owner = g.owner(req)
		}
		out.Contents = append(out.Contents, obj)
	}
	for _, p := range res.Prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, PrefixEntry{Prefix: s3Escape(p, encode)})
	}
	return sendXML(c, fiber.StatusOK, out)
}

func (g *Gateway) listObjectsV1(c *fiber.Ctx, req *request) error {
	prefix, delim, maxKeys, encode, err := listArgs(req)
	if err != nil {
		return err
	}
	marker := req.query.Get("marker")
	res, err := g.runList(req, prefix, delim, marker, maxKeys)
	if err != nil {
		return err
	}
	// S3 leaves a V1 listing's Prefix as sent (botocore does not decode
	// it); Delimiter, Marker, NextMarker, keys and common prefixes are
	// encoded.
	out := ListObjectsV1Output{
		Name: req.bucket, Prefix: prefix, Delimiter: s3Escape(delim, encode),
		Marker: s3Escape(marker, encode), MaxKeys: maxKeys, IsTruncated: res.Truncated,
	}
	if encode {
		out.EncodingType = "url"
	}
	if res.Truncated && delim != "" {
		out.NextMarker = s3Escape(res.Last, encode)
	}
	for _, e := range res.Objects {
		obj := g.listObject(e, encode)
		obj.Owner = g.owner(req)
		out.Contents = append(out.Contents, obj)
	}
	for _, p := range res.Prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, PrefixEntry{Prefix: s3Escape(p, encode)})
	}
	return sendXML(c, fiber.StatusOK, out)
}

func (g *Gateway) runList(req *request, prefix, delim, after string, maxKeys int) (listResult, error) {
	ctx, cancel := g.opContext()
	defer cancel()
	if _, err := g.layer.bucket(ctx, g.buckets, req.bucket); err != nil {
		return listResult{}, bucketErr(err)
	}
	if maxKeys == 0 {
		// S3 answers max-keys=0 with an empty, untruncated page: there is
		// no last entry to continue from.
		return listResult{}, nil
	}
	return g.layer.list(ctx, listParams{Bucket: req.bucket, Prefix: prefix, Delimiter: delim, After: after, Max: maxKeys})
}

func (g *Gateway) listObject(e metadata.ListEntry, encode bool) ObjectEntry {
	class := e.StorageClass
	if class == "" {
		class = "STANDARD"
	}
	return ObjectEntry{
		Key: s3Escape(e.Key, encode), LastModified: ts(e.Modified), ETag: `"` + e.ETag + `"`,
		Size: e.Size, StorageClass: class,
	}
}

// listObjectVersions answers ListObjectVersions. A bucket never
// versioned keeps one version per key, so every current object is listed
// as its null version, latest; cleanup scripts, Terraform's force_destroy
// and rclone --s3-versions ask for versions on every bucket, as S3
// answers them. A versioned bucket lists every visible version and
// delete marker (listVersioned).
func (g *Gateway) listObjectVersions(c *fiber.Ctx, req *request) error {
	prefix, delim, maxKeys, encode, err := listArgs(req)
	if err != nil {
		return err
	}
	q := req.query
	keyMarker, idMarker := q.Get("key-marker"), q.Get("version-id-marker")
	ctx, cancel := g.opContext()
	defer cancel()
	b, err := g.layer.bucket(ctx, g.buckets, req.bucket)
	if err != nil {
		return bucketErr(err)
	}
	switch {
	case idMarker != "" && keyMarker == "":
		return apiErr("InvalidArgument", "A version-id marker cannot be specified without a key marker.")
	case idMarker != "" && idMarker != "null" && b.Versioning == "":
		return apiErr("InvalidArgument", "Invalid version id specified")
	case idMarker != "" && idMarker != "null":
		if _, err := metadata.ParseVersion(idMarker); err != nil {
			return apiErr("InvalidArgument", "Invalid version id specified")
		}
	}
	out := ListVersionsResult{
		Name: req.bucket, Prefix: s3Escape(prefix, encode), Delimiter: s3Escape(delim, encode),
		KeyMarker: s3Escape(keyMarker, encode), VersionIDMarker: idMarker,
		MaxKeys: maxKeys,
	}
	if encode {
		out.EncodingType = "url"
	}
	if b.Versioning != "" {
		if err := g.listVersioned(ctx, req, &out, prefix, delim, keyMarker, idMarker, maxKeys, encode); err != nil {
			return err
		}
		return sendXML(c, fiber.StatusOK, out)
	}
	// The only version of key-marker is null: whether or not
	// version-id-marker names it, the listing goes on after that key.
	res, err := g.runList(req, prefix, delim, keyMarker, maxKeys)
	if err != nil {
		return err
	}
	out.IsTruncated = res.Truncated
	if res.Truncated {
		out.NextKeyMarker = s3Escape(res.Last, encode)
		if n := len(res.Objects); n > 0 && res.Objects[n-1].Key == res.Last {
			out.NextVersionIDMarker = "null"
		}
	}
	owner := g.owner(req)
	for _, e := range res.Objects {
		obj := g.listObject(e, encode)
		out.Versions = append(out.Versions, VersionEntry{
			Key: obj.Key, VersionID: "null", IsLatest: true, LastModified: obj.LastModified,
			ETag: obj.ETag, Size: &obj.Size, StorageClass: obj.StorageClass, Owner: owner,
		})
	}
	for _, p := range res.Prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, PrefixEntry{Prefix: s3Escape(p, encode)})
	}
	return sendXML(c, fiber.StatusOK, out)
}

// listVersioned fills out with up to maxKeys versions, delete markers
// and common prefixes of a versioned bucket, in key order and newest
// first within a key, after (keyMarker, idMarker): with an ID marker the
// listing resumes inside keyMarker's versions, after that one.
func (g *Gateway) listVersioned(ctx context.Context, req *request, out *ListVersionsResult, prefix, delim, keyMarker, idMarker string, maxKeys int, encode bool) error {
	if maxKeys == 0 {
		return nil
	}
	after := keyMarker
	if idMarker != "" {
		after = keyBefore(keyMarker)
	}
	res, err := g.layer.list(ctx, listParams{Bucket: req.bucket, Prefix: prefix, Delimiter: delim, After: after, Max: maxKeys + 1, Versions: true})
	if err != nil {
		return err
	}
	owner := g.owner(req)
	n := 0
	full := func(key, id string) bool {
		if n < maxKeys {
			n++
			out.NextKeyMarker, out.NextVersionIDMarker = s3Escape(key, encode), id
			return false
		}
		out.IsTruncated = true
		return true
	}
	objs, prefixes := res.Objects, res.Prefixes
	for len(objs) > 0 || len(prefixes) > 0 {
		if len(prefixes) > 0 && (len(objs) == 0 || prefixes[0] < objs[0].Key) {
			if full(prefixes[0], "") {
				break
			}
			out.CommonPrefixes = append(out.CommonPrefixes, PrefixEntry{Prefix: s3Escape(prefixes[0], encode)})
			prefixes = prefixes[1:]
			continue
		}
		e := objs[0]
		objs = objs[1:]
		versions := append([]metadata.ListEntry{e}, e.Previous...)
		skipping := idMarker != "" && e.Key == keyMarker
		stop := false
		for i, v := range versions {
			id := metadata.NullVersionID
			if v.VersionID != "" {
				id = v.VersionID
			}
			if skipping {
				skipping = id != idMarker
				continue
			}
			if stop = full(e.Key, id); stop {
				break
			}
			ve := VersionEntry{
				Key: s3Escape(e.Key, encode), VersionID: id, IsLatest: i == 0,
				LastModified: ts(v.Modified), Owner: owner,
			}
			if v.Deleted {
				ve = ve.Marker()
			} else {
				obj := g.listObject(v, encode)
				ve.ETag, ve.Size, ve.StorageClass = obj.ETag, &obj.Size, obj.StorageClass
			}
			out.Versions = append(out.Versions, ve)
		}
		if stop {
			break
		}
	}
	if !out.IsTruncated && res.Truncated {
		out.IsTruncated = true
	}
	if !out.IsTruncated {
		out.NextKeyMarker, out.NextVersionIDMarker = "", ""
	}
	return nil
}

// keyBefore returns a name that sorts just before key with no key
// between them, so that a listing strictly after it starts at key: key
// less its last byte, that byte one lower and followed by 0xff (which no
// UTF-8 key contains), or key less a trailing NUL.
func keyBefore(key string) string {
	n := len(key)
	if n == 0 {
		return ""
	}
	if key[n-1] == 0 {
		return key[:n-1]
	}
	return key[:n-1] + string([]byte{key[n-1] - 1}) + "\xff"
}
