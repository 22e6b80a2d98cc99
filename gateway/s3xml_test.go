package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/regen-s3/regen/internal/sigv4"
)

var xmlTestTime = time.Date(2026, 2, 3, 4, 5, 6, 789_000_000, time.UTC)

func TestTimestampFormat(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	b, _ := Timestamp(xmlTestTime.In(loc)).MarshalText()
	if string(b) != "2026-02-03T04:05:06.789Z" {
		t.Errorf("got %s", b)
	}
	b, _ = Timestamp(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).MarshalText()
	if string(b) != "2026-01-01T00:00:00.000Z" {
		t.Errorf("got %s", b)
	}
}

func TestExactDocuments(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{ListBucketsOutput{Owner: &CanonicalUser{ID: "ak", DisplayName: "ak"}},
			`<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>ak</ID><DisplayName>ak</DisplayName></Owner><Buckets></Buckets></ListAllMyBucketsResult>`},
		{LocationConstraintOutput{},
			`<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></LocationConstraint>`},
		{ErrorResponse{Code: "NoSuchKey", Message: "The specified key does not exist.", Resource: "/b/k", RequestID: "r1"},
			`<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Resource>/b/k</Resource><RequestId>r1</RequestId></Error>`},
		{CopyObjectResult{ETag: `"abc"`, LastModified: Timestamp(xmlTestTime)},
			`<CopyObjectResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ETag>&#34;abc&#34;</ETag><LastModified>2026-02-03T04:05:06.789Z</LastModified></CopyObjectResult>`},
	}
	for _, c := range cases {
		got := string(EncodeXML(c.v))
		if got != `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func TestAPIErrors(t *testing.T) {
	want := map[string]int{
		"AccessDenied": 403, "BadDigest": 400, "BucketAlreadyExists": 409, "BucketAlreadyOwnedByYou": 409,
		"BucketNotEmpty": 409, "EntityTooLarge": 400, "EntityTooSmall": 400, "IncompleteBody": 400,
		"InternalError": 500, "InvalidAccessKeyId": 403, "InvalidArgument": 400, "InvalidBucketName": 400,
		"InvalidDigest": 400, "InvalidPart": 400, "InvalidPartOrder": 400, "InvalidRange": 416,
		"InvalidRequest": 400, "KeyTooLongError": 400, "MalformedXML": 400, "MethodNotAllowed": 405,
		"MissingContentLength": 411, "NoSuchBucket": 404, "NoSuchKey": 404, "NoSuchUpload": 404,
		"NotImplemented": 501, "PreconditionFailed": 412, "RequestTimeTooSkewed": 403,
		"ServiceUnavailable": 503, "SignatureDoesNotMatch": 403, "SlowDown": 503,
		"XAmzContentSHA256Mismatch": 400, "AuthorizationHeaderMalformed": 400, "MetadataTooLarge": 400,
		"InvalidStorageClass": 400, "NotModified": 304, "AuthorizationQueryParametersError": 400, "InvalidURI": 400,
	}
	for code, status := range want {
		e := APIErrorFor(code)
		if e.Code != code || e.HTTPStatus != status || e.Message == "" {
			t.Errorf("%s: %+v", code, e)
		}
	}
	if e := APIErrorFor("NoSuchThing"); e.HTTPStatus != 500 {
		t.Errorf("unknown code: %+v", e)
	}
	e := ErrNoSuchKey.With("gone")
	if e.Message != "gone" || ErrNoSuchKey.Message == "gone" || !errors.Is(e, ErrNoSuchKey) || errors.Is(e, ErrNoSuchBucket) {
		t.Errorf("With: %+v / %+v", e, ErrNoSuchKey)
	}
	wrapped := fmt.Errorf("put: %w", ErrBadDigest.Withf("part %d", 3))
	if ae := AsAPIError(wrapped); ae == nil || ae.Code != "BadDigest" || ae.Message != "part 3" {
		t.Errorf("AsAPIError: %+v", ae)
	}
}

func TestFromSigV4(t *testing.T) {
	v := &sigv4.Verifier{Creds: sigv4.StaticCredentials{"AK": "S"}}
	_, err := v.Verify(&sigv4.Request{Method: "GET", Path: "/b", Host: "h", Header: http.Header{}, Now: time.Now()})
	ae := FromSigV4(fmt.Errorf("auth: %w", err))
	if ae == nil || ae.Code != "AccessDenied" || ae.HTTPStatus != 403 {
		t.Fatalf("FromSigV4 = %+v", ae)
	}
	if AsAPIError(err).Code != "AccessDenied" {
		t.Errorf("AsAPIError on sigv4 error")
	}
	if FromSigV4(errors.New("other")) != nil {
		t.Errorf("FromSigV4 of a non-sigv4 error")
	}
	_, err = io.ReadAll(sigv4.NewSHA256Reader(strings.NewReader("x"), sigv4.EmptySHA256))
	if ae := FromSigV4(err); ae == nil || ae.Code != "XAmzContentSHA256Mismatch" || ae.HTTPStatus != 400 {
		t.Errorf("sha mismatch: %+v", ae)
	}
}

func TestRequestValidation(t *testing.T) {
	var d DeleteObjectsRequest
	err := DecodeXML(strings.NewReader(`<Delete><Quiet>true</Quiet><Object><Key>a</Key></Object><Object><Key>b b</Key><VersionId>v</VersionId></Object></Delete>`), &d)
	if err != nil || !d.Quiet || len(d.Objects) != 2 || d.Objects[1].VersionID != "v" || d.Validate() != nil {
		t.Fatalf("Delete: %v %+v", err, d)
	}
	many := "<Delete>" + strings.Repeat("<Object><Key>k</Key></Object>", 1001) + "</Delete>"
	d = DeleteObjectsRequest{}
	if err := DecodeXML(strings.NewReader(many), &d); err != nil || !errors.Is(d.Validate(), ErrMalformedXML) {
		t.Errorf("1001 keys: %v", d.Validate())
	}
	for _, body := range []string{"<Delete><Object>", "<Other/>", "not xml"} {
		if err := DecodeXML(strings.NewReader(body), &DeleteObjectsRequest{}); !errors.Is(err, ErrMalformedXML) {
			t.Errorf("%q: %v", body, err)
		}
	}
	if err := DecodeXML(strings.NewReader(""), &DeleteObjectsRequest{}); !errors.Is(err, ErrMissingRequestBodyError) {
		t.Errorf("empty: %v", err)
	}
	parts := func(nums ...int) *CompleteMultipartUpload {
		c := &CompleteMultipartUpload{}
		for _, n := range nums {
			c.Parts = append(c.Parts, CompletePart{PartNumber: n, ETag: `"e"`})
		}
		return c
	}
	for _, c := range []struct {
		c    *CompleteMultipartUpload
		want *APIError
	}{
		{parts(1, 2, 5), nil},
		{parts(), ErrMalformedXML},
		{parts(2, 1), ErrInvalidPartOrder},
		{parts(1, 1), ErrInvalidPartOrder},
		{parts(0), ErrInvalidArgument},
		{parts(10001), ErrInvalidArgument},
	} {
		err := c.c.Validate()
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%+v: %v, want %v", c.c.Parts, err, c.want)
		}
	}
	var cfg CreateBucketConfiguration
	if err := DecodeXML(strings.NewReader(`<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>`), &cfg); err != nil || cfg.LocationConstraint != "eu-west-1" {
		t.Errorf("CreateBucketConfiguration: %v %+v", err, cfg)
	}
}

// (minio.Core returns list and part ETags as sent, quotes included.)

// xmlFake answers minio-go with this package's XML types and parses
// minio-go's request bodies with them. It does no authentication or storage:
// it only checks that the two sides agree on the documents.
type xmlFake struct {
	t        *testing.T
	location string
	deleted  []ObjectIdentifier
	complete *CompleteMultipartUpload
}

func (f *xmlFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	send := func(v any) {
		w.Header().Set("Content-Type", "application/xml")
		w.Write(EncodeXML(v))
	}
	fail := func(e *APIError) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(e.HTTPStatus)
		w.Write(e.ErrorXML(r.URL.Path, "req-1"))
	}
	owner := &CanonicalUser{ID: "owner-id", DisplayName: "owner"}
	switch {
	case r.Method == "GET" && bucket == "":
		send(ListBucketsOutput{Owner: owner, Buckets: BucketList{Bucket: []BucketEntry{
			{Name: "alpha", CreationDate: Timestamp(xmlTestTime)}, {Name: "beta", CreationDate: Timestamp(xmlTestTime.Add(time.Hour))}}}})
	case r.Method == "PUT" && key == "" && len(q) == 0:
		var cfg CreateBucketConfiguration
		if r.ContentLength != 0 {
			if err := DecodeXML(r.Body, &cfg); err != nil {
				fail(AsAPIError(err))
				return
			}
		}
		f.location = cfg.LocationConstraint
	case r.Method == "GET" && q.Has("location"):
		send(LocationConstraintOutput{Location: "eu-west-1"})
	case r.Method == "GET" && key == "" && q.Get("list-type") == "2":
		send(ListObjectsV2Output{Name: bucket, Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), MaxKeys: 2, KeyCount: 3,
			IsTruncated: true, ContinuationToken: q.Get("continuation-token"), NextContinuationToken: "next==",
			StartAfter: q.Get("start-after"),
			Contents: []ObjectEntry{
				{Key: "dir/a b", LastModified: Timestamp(xmlTestTime), ETag: `"0123"`, Size: 42, StorageClass: "STANDARD"},
				{Key: "dir/ü+&<>", LastModified: Timestamp(xmlTestTime), ETag: `"4567-2"`, Size: 7, StorageClass: "STANDARD", Owner: owner},
			},
			CommonPrefixes: []PrefixEntry{{Prefix: "dir/sub/"}}})
	case r.Method == "GET" && key == "" && q.Has("uploads"):
		send(ListMultipartUploadsResult{Bucket: bucket, Prefix: q.Get("prefix"), MaxUploads: 1000, NextKeyMarker: "k", NextUploadIDMarker: "u",
			IsTruncated: true, Uploads: []UploadEntry{{Key: "k", UploadID: "u", Initiator: owner, Owner: owner, StorageClass: "STANDARD", Initiated: Timestamp(xmlTestTime)}},
			CommonPrefixes: []PrefixEntry{{Prefix: "p/"}}})
	case r.Method == "GET" && key == "":
		send(ListObjectsV1Output{Name: bucket, Prefix: q.Get("prefix"), Marker: q.Get("marker"), NextMarker: "dir/a b", Delimiter: q.Get("delimiter"),
			MaxKeys: 1, IsTruncated: true, Contents: []ObjectEntry{{Key: "dir/a b", LastModified: Timestamp(xmlTestTime), ETag: `"0123"`, Size: 42, StorageClass: "STANDARD"}},
			CommonPrefixes: []PrefixEntry{{Prefix: "dir/sub/"}}})
	case r.Method == "POST" && q.Has("delete"):
		var d DeleteObjectsRequest
		if err := DecodeXML(r.Body, &d); err != nil {
			fail(AsAPIError(err))
			return
		}
		if err := d.Validate(); err != nil {
			fail(AsAPIError(err))
			return
		}
		f.deleted = d.Objects
		var res DeleteResult
		for _, o := range d.Objects {
			if o.Key == "locked" {
				res.Errors = append(res.Errors, DeleteError{Key: o.Key, Code: "AccessDenied", Message: "Access Denied"})
			} else if !d.Quiet {
				res.Deleted = append(res.Deleted, DeletedObject{Key: o.Key})
			}
		}
		send(res)
	case r.Method == "POST" && q.Has("uploads"):
		send(InitiateMultipartUploadResult{Bucket: bucket, Key: key, UploadID: "upload-1"})
	case r.Method == "POST" && q.Has("uploadId"):
		var c CompleteMultipartUpload
		if err := DecodeXML(r.Body, &c); err != nil {
			fail(AsAPIError(err))
			return
		}
		if err := c.Validate(); err != nil {
			fail(AsAPIError(err))
			return
		}
		f.complete = &c
		send(CompleteMultipartUploadResult{Location: "http://x/" + bucket + "/" + key, Bucket: bucket, Key: key, ETag: `"abc-2"`})
	case r.Method == "GET" && q.Has("uploadId"):
		send(ListPartsResult{Bucket: bucket, Key: key, UploadID: q.Get("uploadId"), Initiator: owner, Owner: owner, StorageClass: "STANDARD",
			MaxParts: 1000, Parts: []PartEntry{
				{PartNumber: 1, LastModified: Timestamp(xmlTestTime), ETag: `"p1"`, Size: 5 << 20},
				{PartNumber: 2, LastModified: Timestamp(xmlTestTime), ETag: `"p2"`, Size: 1, Checksums: Checksums{ChecksumCRC32C: "AAAAAA=="}},
			}})
	case r.Method == "PUT" && r.Header.Get("X-Amz-Copy-Source") != "" && q.Has("partNumber"):
		send(CopyPartResult{ETag: `"cp"`, LastModified: Timestamp(xmlTestTime)})
	case r.Method == "PUT" && r.Header.Get("X-Amz-Copy-Source") != "":
		send(CopyObjectResult{ETag: `"co"`, LastModified: Timestamp(xmlTestTime)})
	case r.Method == "PUT" && q.Has("partNumber"):
		io.Copy(io.Discard, r.Body)
		w.Header().Set("ETag", `"p`+q.Get("partNumber")+`"`)
	case (r.Method == "GET" || r.Method == "HEAD") && key == "missing":
		fail(ErrNoSuchKey.With(""))
	default:
		fail(ErrNotImplemented.With(r.Method + " " + r.URL.String()))
	}
}

func TestXMLWithMinioClient(t *testing.T) {
	fake := &xmlFake{t: t}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	core, err := minio.NewCore(u.Host, &minio.Options{Creds: credentials.NewStaticV4("ak", "sk", ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	buckets, err := core.ListBuckets(ctx)
	if err != nil || len(buckets) != 2 || buckets[1].Name != "beta" || !buckets[0].CreationDate.Equal(xmlTestTime) {
		t.Fatalf("ListBuckets: %v %+v", err, buckets)
	}
	if err := core.MakeBucket(ctx, "newbucket", minio.MakeBucketOptions{Region: "eu-west-1"}); err != nil || fake.location != "eu-west-1" {
		t.Fatalf("MakeBucket: %v, location %q", err, fake.location)
	}
	core2, _ := minio.NewCore(u.Host, &minio.Options{Creds: credentials.NewStaticV4("ak", "sk", "")})
	if loc, err := core2.GetBucketLocation(ctx, "bkt"); err != nil || loc != "eu-west-1" {
		t.Fatalf("GetBucketLocation: %q %v", loc, err)
	}

	v2, err := core.ListObjectsV2("bkt", "dir/", "", "tok", "/", 2)
	if err != nil {
		t.Fatalf("ListObjectsV2: %v", err)
	}
	if v2.Name != "bkt" || v2.Prefix != "dir/" || v2.Delimiter != "/" || !v2.IsTruncated || v2.NextContinuationToken != "next==" ||
		v2.ContinuationToken != "tok" || len(v2.Contents) != 2 || v2.Contents[1].Key != "dir/ü+&<>" || v2.Contents[0].Size != 42 ||
		v2.Contents[0].ETag != `"0123"` || !v2.Contents[0].LastModified.Equal(xmlTestTime) || v2.Contents[1].Owner.ID != "owner-id" ||
		len(v2.CommonPrefixes) != 1 || v2.CommonPrefixes[0].Prefix != "dir/sub/" {
		t.Errorf("ListObjectsV2: %+v", v2)
	}
	v1, err := core.ListObjects("bkt", "dir/", "m", "/", 1)
	if err != nil || v1.Marker != "m" || v1.NextMarker != "dir/a b" || !v1.IsTruncated || len(v1.Contents) != 1 || v1.Contents[0].StorageClass != "STANDARD" ||
		len(v1.CommonPrefixes) != 1 {
		t.Errorf("ListObjects: %v %+v", err, v1)
	}

	id, err := core.NewMultipartUpload(ctx, "bkt", "big/obj", minio.PutObjectOptions{})
	if err != nil || id != "upload-1" {
		t.Fatalf("NewMultipartUpload: %q %v", id, err)
	}
	parts, err := core.ListObjectParts(ctx, "bkt", "big/obj", id, 0, 1000)
	if err != nil || parts.UploadID != id || len(parts.ObjectParts) != 2 || parts.ObjectParts[1].ETag != `"p2"` ||
		parts.ObjectParts[1].ChecksumCRC32C != "AAAAAA==" || !parts.ObjectParts[0].LastModified.Equal(xmlTestTime) || parts.ObjectParts[0].Size != 5<<20 {
		t.Errorf("ListObjectParts: %v %+v", err, parts)
	}
	ups, err := core.ListMultipartUploads(ctx, "bkt", "", "", "", "/", 1000)
	if err != nil || len(ups.Uploads) != 1 || ups.Uploads[0].UploadID != "u" || !ups.Uploads[0].Initiated.Equal(xmlTestTime) ||
		ups.NextKeyMarker != "k" || !ups.IsTruncated || len(ups.CommonPrefixes) != 1 {
		t.Errorf("ListMultipartUploads: %v %+v", err, ups)
	}
	cp, err := core.CopyObjectPart(ctx, "src", "s", "bkt", "big/obj", id, 3, 0, 10, nil)
	if err != nil || strings.Trim(cp.ETag, `"`) != "cp" || cp.PartNumber != 3 {
		t.Errorf("CopyObjectPart: %v %+v", err, cp)
	}
	info, err := core.CompleteMultipartUpload(ctx, "bkt", "big/obj", id, []minio.CompletePart{
		{PartNumber: 1, ETag: "p1"}, {PartNumber: 2, ETag: "p2", ChecksumCRC32C: "AAAAAA=="}}, minio.PutObjectOptions{})
	if err != nil || info.ETag != "abc-2" {
		t.Fatalf("CompleteMultipartUpload: %v %+v", err, info)
	}
	if c := fake.complete; c == nil || len(c.Parts) != 2 || c.Parts[1].PartNumber != 2 || c.Parts[1].ChecksumCRC32C != "AAAAAA==" ||
		strings.Trim(c.Parts[0].ETag, `"`) != "p1" {
		t.Errorf("parsed CompleteMultipartUpload: %+v", fake.complete)
	}
	// Out-of-order parts: our validation's error reaches the client by code.
	_, err = core.CompleteMultipartUpload(ctx, "bkt", "big/obj", id, []minio.CompletePart{{PartNumber: 2, ETag: "a"}, {PartNumber: 1, ETag: "b"}}, minio.PutObjectOptions{})
	if minio.ToErrorResponse(err).Code != "InvalidPartOrder" {
		t.Errorf("out of order: %v", err)
	}

	co, err := core.CopyObject(ctx, "src", "s", "bkt", "dst", nil, minio.CopySrcOptions{}, minio.PutObjectOptions{})
	if err != nil || co.ETag != "co" || !co.LastModified.Equal(xmlTestTime) {
		t.Errorf("CopyObject: %v %+v", err, co)
	}

	objs := make(chan minio.ObjectInfo, 3)
	for _, k := range []string{"a", "b & c", "locked"} {
		objs <- minio.ObjectInfo{Key: k}
	}
	close(objs)
	var failed []string
	for e := range core.RemoveObjects(ctx, "bkt", objs, minio.RemoveObjectsOptions{}) {
		failed = append(failed, e.ObjectName+":"+minio.ToErrorResponse(e.Err).Code)
	}
	if len(failed) != 1 || failed[0] != "locked:AccessDenied" || len(fake.deleted) != 3 || fake.deleted[1].Key != "b & c" {
		t.Errorf("RemoveObjects: failed %v, server saw %+v", failed, fake.deleted)
	}

	_, err = core.StatObject(ctx, "bkt", "missing", minio.StatObjectOptions{})
	if minio.ToErrorResponse(err).StatusCode != 404 {
		t.Errorf("StatObject missing: %v", err)
	}
	_, _, _, err = core.GetObject(ctx, "bkt", "missing", minio.GetObjectOptions{})
	if er := minio.ToErrorResponse(err); er.Code != "NoSuchKey" || er.RequestID != "req-1" || er.Message != ErrNoSuchKey.Message {
		t.Errorf("GetObject missing: %+v", er)
	}
}
