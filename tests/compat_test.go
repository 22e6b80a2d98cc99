package tests

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/sigv4"
)

// sdkClient is an aws-sdk-go-v2 client for d.
func sdkClient(d *devCluster) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(d.info.Endpoint),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(d.info.AccessKey, d.info.SecretKey, ""),
		UsePathStyle: true,
	})
}

// apiCode is the S3 error code of an SDK error ("" for none).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestCompat covers what real clients broke on: ListObjectVersions on
// unversioned buckets, user metadata names, URL-encoded listings,
// max-keys=0, UploadPartCopy ranges, GetObjectAttributes, canned ACLs
// with anonymous access, ownership controls and checksums on reads.
func TestCompat(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := sdkClient(d)
	mc := d.client(t)
	for _, b := range []string{"compat", "pub"} {
		if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("ListObjectVersions", func(t *testing.T) { testListObjectVersions(t, d, c, mc) })
	t.Run("MetadataNames", func(t *testing.T) { testMetadataNames(t, d, c) })
	t.Run("EncodingTypeURL", func(t *testing.T) { testEncodingTypeURL(t, d, c) })
	t.Run("MaxKeysZero", func(t *testing.T) { testMaxKeysZero(t, c) })
	t.Run("UploadPartCopyRange", func(t *testing.T) { testUploadPartCopyRange(t, c) })
	t.Run("GetObjectAttributes", func(t *testing.T) { testGetObjectAttributes(t, c) })
	t.Run("PublicRead", func(t *testing.T) { testPublicRead(t, d, c) })
	t.Run("OwnershipControls", func(t *testing.T) { testOwnershipControls(t, d, c) })
}

func putString(t *testing.T, c *s3.Client, bucket, key, body string) {
	t.Helper()
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatalf("PutObject %s/%s: %v", bucket, key, err)
	}
}

func testListObjectVersions(t *testing.T, d *devCluster, c *s3.Client, mc *minio.Client) {
	keys := []string{"v/a", "v/b", "v/c/1", "v/c/2", "v/d", "v/e f+g"}
	for _, k := range keys {
		putString(t, c, "compat", k, "data of "+k)
	}
	// Paged two at a time with the SDK's paginator: every key once, as its
	// null version, latest.
	var got []string
	p := s3.NewListObjectVersionsPaginator(c, &s3.ListObjectVersionsInput{Bucket: aws.String("compat"), Prefix: aws.String("v/"), MaxKeys: aws.Int32(2)})
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx(t))
		if err != nil {
			t.Fatalf("ListObjectVersions: %v", err)
		}
		pages++
		for _, v := range out.Versions {
			if aws.ToString(v.VersionId) != "null" || !aws.ToBool(v.IsLatest) || aws.ToInt64(v.Size) != int64(len("data of "+aws.ToString(v.Key))) || aws.ToString(v.ETag) == "" {
				t.Errorf("version %+v: want VersionId null, IsLatest, size and ETag", v)
			}
			got = append(got, aws.ToString(v.Key))
		}
		if len(out.DeleteMarkers) != 0 {
			t.Errorf("delete markers on an unversioned bucket: %+v", out.DeleteMarkers)
		}
	}
	if !slices.Equal(got, keys) || pages != 3 {
		t.Errorf("versions listed %q in %d pages; want %q in 3", got, pages, keys)
	}
	// A delimiter rolls keys up, and key-marker / version-id-marker go on
	// after the key.
	out, err := c.ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String("compat"), Prefix: aws.String("v/"),
		Delimiter: aws.String("/"), KeyMarker: aws.String("v/a"), VersionIdMarker: aws.String("null")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range out.Versions {
		names = append(names, aws.ToString(v.Key))
	}
	for _, cp := range out.CommonPrefixes {
		names = append(names, aws.ToString(cp.Prefix))
	}
	if want := []string{"v/b", "v/d", "v/e f+g", "v/c/"}; !slices.Equal(names, want) || aws.ToBool(out.IsTruncated) {
		t.Errorf("with delimiter after v/a: %q (truncated %v); want %q", names, aws.ToBool(out.IsTruncated), want)
	}
	if _, err := c.ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String("compat"), VersionIdMarker: aws.String("null")}); apiCode(err) != "InvalidArgument" {
		t.Errorf("version-id-marker without key-marker: %v; want InvalidArgument", err)
	}
	// minio-go's versioned listing (what mc rm --versions and rclone use).
	n := 0
	for o := range mc.ListObjects(ctx(t), "compat", minio.ListObjectsOptions{Prefix: "v/", Recursive: true, WithVersions: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if o.VersionID != "null" || !o.IsLatest {
			t.Errorf("minio-go version %+v", o)
		}
		n++
	}
	if n != len(keys) {
		t.Errorf("minio-go listed %d versions, want %d", n, len(keys))
	}
	// The raw document has S3's shape.
	code, body := signedRequest(t, d, http.MethodGet, "/compat?versions&prefix=v/c/", nil, nil)
	if code != 200 || !strings.Contains(body, "<ListVersionsResult") || !strings.Contains(body, "<Version><Key>v/c/1</Key><VersionId>null</VersionId><IsLatest>true</IsLatest>") {
		t.Errorf("GET ?versions: %d %s", code, body)
	}
}

// rawHeaderNames sends a signed request over a plain TCP connection and
// returns the response's header names exactly as they came on the wire
// (net/http would canonicalise them).
func rawHeaderNames(t *testing.T, d *devCluster, method, path string) []string {
	t.Helper()
	req, err := http.NewRequest(method, d.info.Endpoint+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	sigv4.Sign(req, d.info.AccessKey, d.info.SecretKey, "us-east-1", time.Now(), sha(nil))
	conn, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req.Close = true
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("%s %s: %q %v", method, path, status, err)
	}
	var names []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return names
		}
		name, _, _ := strings.Cut(line, ":")
		names = append(names, name)
	}
}

func testMetadataNames(t *testing.T, d *devCluster, c *s3.Client) {
	meta := map[string]string{"key1": "value1", "mixed-name": "v2"}
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("compat"), Key: aws.String("meta"), Body: strings.NewReader("m"), Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	check := func(key string, want map[string]string) {
		t.Helper()
		h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String("compat"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		// The SDK keeps the names as received after the prefix.
		for k, v := range want {
			if h.Metadata[k] != v {
				t.Errorf("%s: metadata %v; want %q=%q", key, h.Metadata, k, v)
			}
		}
		names := rawHeaderNames(t, d, http.MethodHead, "/compat/"+key)
		for k := range want {
			if !slices.Contains(names, "x-amz-meta-"+k) {
				t.Errorf("%s: header names on the wire %q; want x-amz-meta-%s as stored", key, names, k)
			}
		}
	}
	check("meta", meta)
	// CopyObject keeps them (COPY) or takes the request's (REPLACE).
	if _, err := c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("compat"), Key: aws.String("meta-copy"), CopySource: aws.String("compat/meta")}); err != nil {
		t.Fatal(err)
	}
	check("meta-copy", meta)
	repl := map[string]string{"key2": "value2"}
	if _, err := c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("compat"), Key: aws.String("meta-repl"), CopySource: aws.String("compat/meta"),
		MetadataDirective: types.MetadataDirectiveReplace, Metadata: repl}); err != nil {
		t.Fatal(err)
	}
	check("meta-repl", repl)
}

func testEncodingTypeURL(t *testing.T, d *devCluster, c *s3.Client) {
	for _, k := range []string{"enc/a b/x", "enc/c+d", "enc/é"} {
		putString(t, c, "compat", k, k)
	}
	mp, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("compat"), Key: aws.String("enc/up load")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.AbortMultipartUpload(ctx(t), &s3.AbortMultipartUploadInput{Bucket: aws.String("compat"), Key: aws.String("enc/up load"), UploadId: mp.UploadId})
	for _, r := range []struct {
		query string
		want  []string // substrings of the document
		not   []string
	}{
		// V1: Prefix as sent; keys, common prefixes, Marker encoded.
		{"?prefix=enc/&delimiter=/&encoding-type=url&marker=enc/a%20b",
			[]string{"<Prefix>enc/</Prefix>", "<Marker>enc/a%20b</Marker>", "<Key>enc/c%2Bd</Key>", "<Key>enc/%C3%A9</Key>", "<Delimiter>/</Delimiter>"}, []string{"enc%2F"}},
		{"?prefix=enc/a%20&delimiter=/&encoding-type=url",
			[]string{"<Prefix>enc/a </Prefix>", "<Prefix>enc/a%20b/</Prefix>"}, nil},
		// V2: Prefix, StartAfter, keys and common prefixes encoded.
		{"?list-type=2&prefix=enc/a%20&delimiter=/&encoding-type=url",
			[]string{"<Prefix>enc/a%20</Prefix>", "<Prefix>enc/a%20b/</Prefix>"}, nil},
		{"?list-type=2&prefix=enc/&encoding-type=url&start-after=enc/c%2Bd",
			[]string{"<Prefix>enc/</Prefix>", "<StartAfter>enc/c%2Bd</StartAfter>", "<Key>enc/%C3%A9</Key>"}, []string{"<Key>enc/c%2Bd</Key>"}},
		// Versions: Prefix, KeyMarker, keys encoded.
		{"?versions&prefix=enc/c%2B&encoding-type=url",
			[]string{"<Prefix>enc/c%2B</Prefix>", "<Key>enc/c%2Bd</Key>"}, nil},
		// Uploads: Prefix and keys encoded.
		{"?uploads&prefix=enc/up%20&encoding-type=url",
			[]string{"<Prefix>enc/up%20</Prefix>", "<Key>enc/up%20load</Key>"}, nil},
	} {
		code, body := signedRequest(t, d, http.MethodGet, "/compat"+r.query, nil, nil)
		if code != 200 {
			t.Errorf("GET %s: %d %s", r.query, code, body)
			continue
		}
		for _, w := range r.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: no %s in %s", r.query, w, body)
			}
		}
		for _, w := range r.not {
			if strings.Contains(body, w) {
				t.Errorf("GET %s: %s in %s", r.query, w, body)
			}
		}
	}
	// The SDK (which asks for url encoding on its own only if told) gets
	// the names back.
	out, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("compat"), Prefix: aws.String("enc/c"), EncodingType: types.EncodingTypeUrl})
	if err != nil || len(out.Contents) != 1 {
		t.Fatalf("ListObjectsV2 url: %v %+v", err, out)
	}
	if k, _ := url.QueryUnescape(aws.ToString(out.Contents[0].Key)); k != "enc/c+d" {
		t.Errorf("encoded key %q decodes to %q", aws.ToString(out.Contents[0].Key), k)
	}
}

func testMaxKeysZero(t *testing.T, c *s3.Client) {
	out, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("compat"), MaxKeys: aws.Int32(0)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToBool(out.IsTruncated) || len(out.Contents) != 0 || aws.ToInt32(out.KeyCount) != 0 {
		t.Errorf("max-keys=0: truncated %v, %d keys; want an empty untruncated page", aws.ToBool(out.IsTruncated), len(out.Contents))
	}
	v1, err := c.ListObjects(ctx(t), &s3.ListObjectsInput{Bucket: aws.String("compat"), MaxKeys: aws.Int32(0)})
	if err != nil || aws.ToBool(v1.IsTruncated) || len(v1.Contents) != 0 {
		t.Errorf("V1 max-keys=0: %v truncated %v", err, v1 != nil && aws.ToBool(v1.IsTruncated))
	}
}

func testUploadPartCopyRange(t *testing.T, c *s3.Client) {
	putString(t, c, "compat", "five", "12345")
	mp, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("compat"), Key: aws.String("dest")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.AbortMultipartUpload(ctx(t), &s3.AbortMultipartUploadInput{Bucket: aws.String("compat"), Key: aws.String("dest"), UploadId: mp.UploadId})
	for rng, want := range map[string]string{
		"bytes=0-21":    "InvalidRange",
		"bytes=5-5":     "InvalidRange",
		"0-2":           "InvalidArgument",
		"bytes=0":       "InvalidArgument",
		"bytes=hello-w": "InvalidArgument",
		"bytes=0-bar":   "InvalidArgument",
		"bytes=hello-":  "InvalidArgument",
		"bytes=0-2,3-4": "InvalidArgument",
		"bytes=3-1":     "InvalidArgument",
	} {
		_, err := c.UploadPartCopy(ctx(t), &s3.UploadPartCopyInput{Bucket: aws.String("compat"), Key: aws.String("dest"), UploadId: mp.UploadId,
			PartNumber: aws.Int32(1), CopySource: aws.String("compat/five"), CopySourceRange: aws.String(rng)})
		if apiCode(err) != want {
			t.Errorf("copy range %q: %v; want %s", rng, err, want)
		}
	}
	if _, err := c.UploadPartCopy(ctx(t), &s3.UploadPartCopyInput{Bucket: aws.String("compat"), Key: aws.String("dest"), UploadId: mp.UploadId,
		PartNumber: aws.Int32(1), CopySource: aws.String("compat/five"), CopySourceRange: aws.String("bytes=1-4")}); err != nil {
		t.Errorf("copy range inside the source: %v", err)
	}
}

func testGetObjectAttributes(t *testing.T, c *s3.Client) {
	b, key := aws.String("compat"), aws.String("attrs/mp")
	data := randomData(11<<20, 40)
	mp, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: b, Key: key, ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	var parts []types.CompletedPart
	var partSums []string
	for i, off := int32(1), 0; off < len(data); i, off = i+1, off+5<<20 {
		body := data[off:min(off+5<<20, len(data))]
		up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: b, Key: key, UploadId: mp.UploadId, PartNumber: aws.Int32(i),
			Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(body)
		partSums = append(partSums, base64.StdEncoding.EncodeToString(s[:]))
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(i), ETag: up.ETag, ChecksumSHA256: up.ChecksumSHA256})
	}
	// ListParts reports each part's checksum.
	lp, err := c.ListParts(ctx(t), &s3.ListPartsInput{Bucket: b, Key: key, UploadId: mp.UploadId})
	if err != nil || len(lp.Parts) != 3 {
		t.Fatalf("ListParts: %v", err)
	}
	for i, p := range lp.Parts {
		if aws.ToString(p.ChecksumSHA256) != partSums[i] {
			t.Errorf("ListParts part %d checksum %q, want %q", i+1, aws.ToString(p.ChecksumSHA256), partSums[i])
		}
	}
	if _, err := c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
	all := []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesChecksum, types.ObjectAttributesObjectParts,
		types.ObjectAttributesStorageClass, types.ObjectAttributesObjectSize}
	at, err := c.GetObjectAttributes(ctx(t), &s3.GetObjectAttributesInput{Bucket: b, Key: key, ObjectAttributes: all, MaxParts: aws.Int32(2)})
	if err != nil {
		t.Fatalf("GetObjectAttributes: %v", err)
	}
	if !strings.HasSuffix(aws.ToString(at.ETag), "-3") || strings.Contains(aws.ToString(at.ETag), `"`) || aws.ToInt64(at.ObjectSize) != int64(len(data)) ||
		at.StorageClass != types.StorageClassStandard || at.Checksum == nil || aws.ToString(at.Checksum.ChecksumSHA256) == "" ||
		at.Checksum.ChecksumType != types.ChecksumTypeComposite {
		t.Errorf("attributes: ETag %q size %d class %q checksum %+v", aws.ToString(at.ETag), aws.ToInt64(at.ObjectSize), at.StorageClass, at.Checksum)
	}
	op := at.ObjectParts
	if op == nil || aws.ToInt32(op.TotalPartsCount) != 3 || !aws.ToBool(op.IsTruncated) || len(op.Parts) != 2 || aws.ToString(op.NextPartNumberMarker) != "2" ||
		aws.ToString(op.Parts[1].ChecksumSHA256) != partSums[1] || aws.ToInt64(op.Parts[0].Size) != 5<<20 {
		t.Fatalf("ObjectParts page 1: %+v", op)
	}
	at, err = c.GetObjectAttributes(ctx(t), &s3.GetObjectAttributesInput{Bucket: b, Key: key, ObjectAttributes: all, PartNumberMarker: aws.String("2")})
	if err != nil || len(at.ObjectParts.Parts) != 1 || aws.ToInt32(at.ObjectParts.Parts[0].PartNumber) != 3 || aws.ToBool(at.ObjectParts.IsTruncated) {
		t.Fatalf("ObjectParts after 2: %v %+v", err, at)
	}
	// Only what was asked for comes back.
	at, err = c.GetObjectAttributes(ctx(t), &s3.GetObjectAttributesInput{Bucket: b, Key: key, ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}})
	if err != nil || at.ETag != nil || at.ObjectParts != nil || aws.ToInt64(at.ObjectSize) != int64(len(data)) {
		t.Errorf("ObjectSize only: %v %+v", err, at)
	}
	if _, err := c.GetObjectAttributes(ctx(t), &s3.GetObjectAttributesInput{Bucket: b, Key: aws.String("attrs/none"), ObjectAttributes: all}); apiCode(err) != "NoSuchKey" {
		t.Errorf("missing key: %v", err)
	}
	// The checksum of one part on GET ?partNumber, the composite one on a
	// whole GET, both with checksum mode.
	g, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: b, Key: key, PartNumber: aws.Int32(2), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if !bytes.Equal(got, data[5<<20:10<<20]) || aws.ToString(g.ChecksumSHA256) != partSums[1] {
		t.Errorf("GET part 2: %d bytes, checksum %q; want %q", len(got), aws.ToString(g.ChecksumSHA256), partSums[1])
	}
	h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: b, Key: key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || !strings.HasSuffix(aws.ToString(h.ChecksumSHA256), "-3") || h.ChecksumType != types.ChecksumTypeComposite {
		t.Errorf("HEAD with checksum mode: %v %q %q", err, aws.ToString(h.ChecksumSHA256), h.ChecksumType)
	}
}

// anonymous sends an unsigned request.
func anonymous(t *testing.T, d *devCluster, method, path string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, d.info.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		// S3 requires it on DeleteObjects; harmless elsewhere.
		sum := md5.Sum(body)
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func testPublicRead(t *testing.T, d *devCluster, c *s3.Client) {
	if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("public"), ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatalf("CreateBucket public-read: %v", err)
	}
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("pub"), Key: aws.String("open"), Body: strings.NewReader("for everyone"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatalf("PutObject public-read: %v", err)
	}
	putString(t, c, "pub", "closed", "owner only")
	putString(t, c, "public", "inside", "listed but private")
	for _, r := range []struct {
		method, path string
		code         int
		body         string
	}{
		{http.MethodGet, "/pub/open", 200, "for everyone"},
		{http.MethodHead, "/pub/open", 200, ""},
		{http.MethodGet, "/pub/closed", 403, "AccessDenied"},
		{http.MethodGet, "/pub/missing", 403, "AccessDenied"},
		{http.MethodGet, "/pub", 403, "AccessDenied"},
		{http.MethodGet, "/pub/open?acl", 403, "AccessDenied"},
		{http.MethodPut, "/pub/open", 403, "AccessDenied"},
		{http.MethodDelete, "/pub/open", 403, "AccessDenied"},
		{http.MethodGet, "/public?list-type=2", 200, "<Key>inside</Key>"},
		{http.MethodHead, "/public", 200, ""},
		{http.MethodGet, "/public/inside", 403, "AccessDenied"},
		{http.MethodPut, "/public/new", 403, "AccessDenied"},
		{http.MethodDelete, "/public", 403, "AccessDenied"},
		{http.MethodGet, "/", 403, "AccessDenied"},
		{http.MethodGet, "/nosuchbucket/x", 404, "NoSuchBucket"},
	} {
		code, body := anonymous(t, d, r.method, r.path, []byte("x"))
		if code != r.code || !strings.Contains(body, r.body) {
			t.Errorf("anonymous %s %s: %d %q; want %d with %q", r.method, r.path, code, body, r.code, r.body)
		}
	}
	if got := get(t, d.client(t), "pub", "open", minio.GetObjectOptions{}); string(got) != "for everyone" {
		t.Errorf("object after refused anonymous writes: %q", got)
	}
	// The ACLs read back as grants, and can be changed.
	acl, err := c.GetObjectAcl(ctx(t), &s3.GetObjectAclInput{Bucket: aws.String("pub"), Key: aws.String("open")})
	if err != nil || !hasAllUsersRead(acl.Grants) {
		t.Errorf("GetObjectAcl public-read: %v %+v", err, acl)
	}
	bacl, err := c.GetBucketAcl(ctx(t), &s3.GetBucketAclInput{Bucket: aws.String("public")})
	if err != nil || !hasAllUsersRead(bacl.Grants) {
		t.Errorf("GetBucketAcl public-read: %v", err)
	}
	if _, err := c.PutObjectAcl(ctx(t), &s3.PutObjectAclInput{Bucket: aws.String("pub"), Key: aws.String("open"), ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatal(err)
	}
	if code, _ := anonymous(t, d, http.MethodGet, "/pub/open", nil); code != 403 {
		t.Errorf("anonymous GET after PutObjectAcl private: %d", code)
	}
	if got := get(t, d.client(t), "pub", "open", minio.GetObjectOptions{}); string(got) != "for everyone" {
		t.Errorf("object data after PutObjectAcl: %q", got)
	}
	if _, err := c.PutObjectAcl(ctx(t), &s3.PutObjectAclInput{Bucket: aws.String("pub"), Key: aws.String("closed"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	if code, body := anonymous(t, d, http.MethodGet, "/pub/closed", nil); code != 200 || body != "owner only" {
		t.Errorf("anonymous GET after PutObjectAcl public-read: %d %q", code, body)
	}
	// Multipart uploads carry the ACL to the completed object.
	up := randomData(6<<20, 41)
	if _, err := d.client(t).PutObject(ctx(t), "pub", "mp", bytes.NewReader(up), int64(len(up)), minio.PutObjectOptions{PartSize: 5 << 20, UserMetadata: map[string]string{"x-amz-acl": "public-read"}}); err != nil {
		t.Fatal(err)
	}
	if code, body := anonymous(t, d, http.MethodGet, "/pub/mp", nil); code != 200 || body != string(up) {
		t.Errorf("anonymous GET of a public-read multipart object: %d (%d bytes)", code, len(body))
	}
	// What regen cannot enforce is refused with a reason.
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("pub"), Key: aws.String("rw"), Body: strings.NewReader("x"), ACL: types.ObjectCannedACLPublicReadWrite})
	if apiCode(err) != "NotImplemented" {
		t.Errorf("public-read-write: %v; want NotImplemented", err)
	}
}

func hasAllUsersRead(grants []types.Grant) bool {
	for _, g := range grants {
		if g.Grantee != nil && aws.ToString(g.Grantee.URI) == "http://acs.amazonaws.com/groups/global/AllUsers" && g.Permission == types.PermissionRead {
			return true
		}
	}
	return false
}

func testOwnershipControls(t *testing.T, d *devCluster, c *s3.Client) {
	b := aws.String("compat")
	if _, err := c.GetBucketOwnershipControls(ctx(t), &s3.GetBucketOwnershipControlsInput{Bucket: b}); apiCode(err) != "OwnershipControlsNotFoundError" {
		t.Errorf("controls before any were set: %v", err)
	}
	for _, o := range []types.ObjectOwnership{types.ObjectOwnershipObjectWriter, types.ObjectOwnershipBucketOwnerEnforced} {
		if _, err := c.PutBucketOwnershipControls(ctx(t), &s3.PutBucketOwnershipControlsInput{Bucket: b,
			OwnershipControls: &types.OwnershipControls{Rules: []types.OwnershipControlsRule{{ObjectOwnership: o}}}}); err != nil {
			t.Fatalf("PutBucketOwnershipControls %s: %v", o, err)
		}
		out, err := c.GetBucketOwnershipControls(ctx(t), &s3.GetBucketOwnershipControlsInput{Bucket: b})
		if err != nil || len(out.OwnershipControls.Rules) != 1 || out.OwnershipControls.Rules[0].ObjectOwnership != o {
			t.Errorf("GetBucketOwnershipControls after %s: %v %+v", o, err, out)
		}
	}
	// BucketOwnerEnforced: ACLs are off.
	_, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: b, Key: aws.String("acl-off"), Body: strings.NewReader("x"), ACL: types.ObjectCannedACLPublicRead})
	if apiCode(err) != "AccessControlListNotSupported" {
		t.Errorf("public-read under BucketOwnerEnforced: %v", err)
	}
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: b, Key: aws.String("acl-off"), Body: strings.NewReader("x"), ACL: types.ObjectCannedACLBucketOwnerFullControl}); err != nil {
		t.Errorf("bucket-owner-full-control under BucketOwnerEnforced: %v", err)
	}
	if _, err := c.DeleteBucketOwnershipControls(ctx(t), &s3.DeleteBucketOwnershipControlsInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketOwnershipControls(ctx(t), &s3.GetBucketOwnershipControlsInput{Bucket: b}); apiCode(err) != "OwnershipControlsNotFoundError" {
		t.Errorf("controls after delete: %v", err)
	}
	// A bucket created with enforced ownership and a public ACL is refused.
	_, err = c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("enforced"), ACL: types.BucketCannedACLPublicRead, ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced})
	if apiCode(err) != "InvalidBucketAclWithObjectOwnership" {
		t.Errorf("CreateBucket public-read + BucketOwnerEnforced: %v", err)
	}
	if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("enforced"), ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced}); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetBucketOwnershipControls(ctx(t), &s3.GetBucketOwnershipControlsInput{Bucket: aws.String("enforced")})
	if err != nil || out.OwnershipControls.Rules[0].ObjectOwnership != types.ObjectOwnershipBucketOwnerEnforced {
		t.Errorf("ownership of a bucket created with it: %v", err)
	}
}
