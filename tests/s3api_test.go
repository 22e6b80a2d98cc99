package tests

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/regen-s3/regen/internal/sigv4"
)

// TestS3Surface exercises the S3 API beyond single PUT/GET on one shared
// dev cluster: multipart, copy, multi-delete, conditional writes,
// checksums. Abandoned uploads expire after 15s here.
func TestS3Surface(t *testing.T) {
	parallel(t)
	d := startDevEnv(t, []string{"REGEN_UPLOAD_MAX_AGE=15s", "REGEN_UPLOAD_SWEEP_INTERVAL=1s"})
	c := d.client(t)
	core := &minio.Core{Client: c}
	mustMakeBucket(t, c, "mpu")
	mustMakeBucket(t, c, "other")

	// Started first, checked last: an abandoned upload is swept, and not
	// before its 15 s.
	begun := time.Now()
	abandoned, err := core.NewMultipartUpload(ctx(t), "mpu", "abandoned", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.PutObjectPart(ctx(t), "mpu", "abandoned", abandoned, 1, bytes.NewReader(randomData(1<<20, 99)), 1<<20, minio.PutObjectPartOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("MultipartRoundTrip", func(t *testing.T) { testMultipartRoundTrip(t, c) })
	t.Run("MultipartErrors", func(t *testing.T) { testMultipartErrors(t, core) })
	t.Run("UploadPartCopy", func(t *testing.T) { testUploadPartCopy(t, c, core) })
	t.Run("CopyObject", func(t *testing.T) { testCopyObject(t, d, c) })
	t.Run("DeleteObjects", func(t *testing.T) { testDeleteObjects(t, d, c) })
	t.Run("ConditionalWrites", func(t *testing.T) { testConditionalWrites(t, d, c) })
	t.Run("Checksums", func(t *testing.T) { testChecksums(t, d) })
	t.Run("Subresources", func(t *testing.T) { testSubresources(t, d, c) })
	t.Run("PartNumber", func(t *testing.T) { testPartNumber(t, d, c, core) })
	t.Run("ACLAndRegion", func(t *testing.T) { testACLAndRegion(t, d, c) })
	t.Run("AbandonedUploadExpires", func(t *testing.T) {
		// NB: the upload began on the servers after begun, so an abort
		// seen less than 15 s after it came too early.
		waitFor(t, time.Until(begun.Add(35*time.Second)), "the abandoned upload to be aborted", func() bool {
			_, err := core.ListObjectParts(ctx(t), "mpu", "abandoned", abandoned, 0, 100)
			if minio.ToErrorResponse(err).Code != "NoSuchUpload" {
				return false
			}
			if age := time.Since(begun); age < 15*time.Second {
				t.Fatalf("the abandoned upload was aborted %s after it began, before its 15 s maximum age", age.Round(100*time.Millisecond))
			}
			return true
		})
	})
}

func testMultipartRoundTrip(t *testing.T, c *minio.Client) {
	data := randomData(17<<20+123, 1)
	info, err := c.PutObject(ctx(t), "mpu", "big/obj", bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{PartSize: 5 << 20, ContentType: "application/x-mp", UserMetadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	// hex(md5(concat of the part MD5s))-N, N = 4 parts.
	var cat []byte
	for off := 0; off < len(data); off += 5 << 20 {
		s := md5.Sum(data[off:min(off+5<<20, len(data))])
		cat = append(cat, s[:]...)
	}
	want := fmt.Sprintf("%x-4", md5.Sum(cat))
	if info.ETag != want {
		t.Errorf("multipart ETag %s, want %s", info.ETag, want)
	}
	if got := get(t, c, "mpu", "big/obj", minio.GetObjectOptions{}); !bytes.Equal(got, data) {
		t.Fatalf("multipart object reads back wrong (%d bytes)", len(got))
	}
	for _, r := range [][2]int64{{5<<20 - 10, 5<<20 + 10}, {0, 15 << 20}, {int64(len(data)) - 5, int64(len(data)) - 1}} {
		opts := minio.GetObjectOptions{}
		opts.SetRange(r[0], r[1])
		if got := get(t, c, "mpu", "big/obj", opts); !bytes.Equal(got, data[r[0]:r[1]+1]) {
			t.Errorf("range %d-%d across parts: wrong bytes", r[0], r[1])
		}
	}
	st, err := c.StatObject(ctx(t), "mpu", "big/obj", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.ContentType != "application/x-mp" || st.UserMetadata["K"] != "v" || st.Size != int64(len(data)) {
		t.Errorf("stat of multipart object: type %q meta %v size %d", st.ContentType, st.UserMetadata, st.Size)
	}
}

func testMultipartErrors(t *testing.T, core *minio.Core) {
	id, err := core.NewMultipartUpload(ctx(t), "mpu", "parts", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	small := randomData(1000, 2)
	big := randomData(5<<20, 3)
	p1, err := core.PutObjectPart(ctx(t), "mpu", "parts", id, 1, bytes.NewReader(small), int64(len(small)), minio.PutObjectPartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := core.PutObjectPart(ctx(t), "mpu", "parts", id, 2, bytes.NewReader(big), int64(len(big)), minio.PutObjectPartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lp, err := core.ListObjectParts(ctx(t), "mpu", "parts", id, 0, 1000)
	if err != nil || len(lp.ObjectParts) != 2 || lp.ObjectParts[1].Size != 5<<20 {
		t.Fatalf("ListParts = %+v, %v", lp.ObjectParts, err)
	}
	ups, err := core.ListMultipartUploads(ctx(t), "mpu", "parts", "", "", "", 100)
	if err != nil || len(ups.Uploads) != 1 || ups.Uploads[0].UploadID != id {
		t.Fatalf("ListMultipartUploads = %+v, %v", ups.Uploads, err)
	}
	complete := func(parts ...minio.CompletePart) string {
		_, err := core.CompleteMultipartUpload(ctx(t), "mpu", "parts", id, parts, minio.PutObjectOptions{})
		return minio.ToErrorResponse(err).Code
	}
	cp1 := minio.CompletePart{PartNumber: 1, ETag: p1.ETag}
	cp2 := minio.CompletePart{PartNumber: 2, ETag: p2.ETag}
	if code := complete(minio.CompletePart{PartNumber: 2, ETag: strings.Repeat("0", 32)}); code != "InvalidPart" {
		t.Errorf("wrong ETag: %q, want InvalidPart", code)
	}
	if code := complete(cp1, minio.CompletePart{PartNumber: 3, ETag: p2.ETag}); code != "InvalidPart" {
		t.Errorf("part never uploaded: %q, want InvalidPart", code)
	}
	if code := complete(cp2, cp1); code != "InvalidPartOrder" {
		t.Errorf("descending parts: %q, want InvalidPartOrder", code)
	}
	if code := complete(cp1, cp2); code != "EntityTooSmall" {
		t.Errorf("small first part: %q, want EntityTooSmall", code)
	}
	// The failed completions changed nothing: completing with part 2 alone works.
	if code := complete(cp2); code != "" {
		t.Fatalf("complete: %q", code)
	}
	obj, err := core.Client.GetObject(ctx(t), "mpu", "parts", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("completed object: %d bytes, %v", len(got), err)
	}
	if _, err := core.ListObjectParts(ctx(t), "mpu", "parts", id, 0, 10); minio.ToErrorResponse(err).Code != "NoSuchUpload" {
		t.Errorf("ListParts after complete: %v, want NoSuchUpload", err)
	}

	id2, err := core.NewMultipartUpload(ctx(t), "mpu", "aborted", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := core.AbortMultipartUpload(ctx(t), "mpu", "aborted", id2); err != nil {
		t.Fatal(err)
	}
	_, err = core.PutObjectPart(ctx(t), "mpu", "aborted", id2, 1, bytes.NewReader(small), int64(len(small)), minio.PutObjectPartOptions{})
	if code := minio.ToErrorResponse(err).Code; code != "NoSuchUpload" {
		t.Errorf("part of aborted upload: %q, want NoSuchUpload", code)
	}
	_, err = core.PutObjectPart(ctx(t), "mpu", "parts", "nope", 10001, bytes.NewReader(small), int64(len(small)), minio.PutObjectPartOptions{})
	if code := minio.ToErrorResponse(err).Code; code != "InvalidArgument" {
		t.Errorf("part number 10001: %q, want InvalidArgument", code)
	}
}

func testUploadPartCopy(t *testing.T, c *minio.Client, core *minio.Core) {
	src := randomData(12<<20, 4)
	put(t, c, "mpu", "copysrc", src, minio.PutObjectOptions{DisableMultipart: true})
	id, err := core.NewMultipartUpload(ctx(t), "other", "assembled", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Part 1: bytes [6 MiB, 12 MiB) of the source; part 2: [0, 100).
	p1, err := core.CopyObjectPart(ctx(t), "mpu", "copysrc", "other", "assembled", id, 1, 6<<20, 6<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := core.CopyObjectPart(ctx(t), "mpu", "copysrc", "other", "assembled", id, 2, 0, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.CompleteMultipartUpload(ctx(t), "other", "assembled", id, []minio.CompletePart{p1, p2}, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(src[6<<20:]), src[:100]...)
	if got := get(t, c, "other", "assembled", minio.GetObjectOptions{}); !bytes.Equal(got, want) {
		t.Fatalf("UploadPartCopy result differs (%d bytes, want %d)", len(got), len(want))
	}
}

func testCopyObject(t *testing.T, d *devCluster, c *minio.Client) {
	data := randomData(9<<20, 5)
	put(t, c, "mpu", "orig", data, minio.PutObjectOptions{ContentType: "text/x-orig", UserMetadata: map[string]string{"a": "1"}, DisableMultipart: true})
	// COPY directive into another bucket keeps the metadata.
	if _, err := c.CopyObject(ctx(t), minio.CopyDestOptions{Bucket: "other", Object: "copied"}, minio.CopySrcOptions{Bucket: "mpu", Object: "orig"}); err != nil {
		t.Fatal(err)
	}
	st, err := c.StatObject(ctx(t), "other", "copied", minio.StatObjectOptions{})
	if err != nil || st.ContentType != "text/x-orig" || st.UserMetadata["A"] != "1" {
		t.Fatalf("COPY: %+v %v", st, err)
	}
	if got := get(t, c, "other", "copied", minio.GetObjectOptions{}); !bytes.Equal(got, data) {
		t.Fatal("copied object differs")
	}
	// REPLACE onto itself changes the metadata and keeps the data.
	if _, err := c.CopyObject(ctx(t), minio.CopyDestOptions{Bucket: "mpu", Object: "orig", ReplaceMetadata: true, UserMetadata: map[string]string{"b": "2"}},
		minio.CopySrcOptions{Bucket: "mpu", Object: "orig"}); err != nil {
		t.Fatal(err)
	}
	st, err = c.StatObject(ctx(t), "mpu", "orig", minio.StatObjectOptions{})
	if err != nil || st.UserMetadata["B"] != "2" || st.UserMetadata["A"] != "" {
		t.Fatalf("REPLACE: %+v %v", st.UserMetadata, err)
	}
	if got := get(t, c, "mpu", "orig", minio.GetObjectOptions{}); !bytes.Equal(got, data) {
		t.Fatal("object copied onto itself differs")
	}
	// Copying onto itself without REPLACE is refused.
	code, _ := signedRequest(t, d, http.MethodPut, "/mpu/orig", nil, map[string]string{"x-amz-copy-source": "/mpu/orig"})
	if code != http.StatusBadRequest {
		t.Errorf("self-copy with COPY directive: status %d, want 400", code)
	}
	// Missing source.
	code, body := signedRequest(t, d, http.MethodPut, "/other/x", nil, map[string]string{"x-amz-copy-source": "/mpu/missing"})
	if code != http.StatusNotFound || !strings.Contains(body, "NoSuchKey") {
		t.Errorf("copy of missing source: %d %s", code, body)
	}
}

func testDeleteObjects(t *testing.T, d *devCluster, c *minio.Client) {
	for i := range 30 {
		put(t, c, "other", fmt.Sprintf("del/%02d", i), []byte("x"), minio.PutObjectOptions{})
	}
	objs := make(chan minio.ObjectInfo, 31)
	for i := range 30 {
		objs <- minio.ObjectInfo{Key: fmt.Sprintf("del/%02d", i)}
	}
	objs <- minio.ObjectInfo{Key: "del/never-existed"}
	close(objs)
	for e := range c.RemoveObjects(ctx(t), "other", objs, minio.RemoveObjectsOptions{}) {
		t.Errorf("remove %s: %v", e.ObjectName, e.Err)
	}
	for o := range c.ListObjects(ctx(t), "other", minio.ListObjectsOptions{Prefix: "del/", Recursive: true}) {
		t.Errorf("still listed after DeleteObjects: %s %v", o.Key, o.Err)
	}
	// Non-quiet mode reports every deleted key.
	put(t, c, "other", "del/a b+c", []byte("x"), minio.PutObjectOptions{})
	body := `<Delete><Object><Key>del/a b+c</Key></Object><Object><Key>del/zz</Key></Object></Delete>`
	// S3 requires Content-MD5 (or an x-amz-checksum-*) on DeleteObjects.
	code, resp := signedRequest(t, d, http.MethodPost, "/other?delete", []byte(body), map[string]string{"Content-MD5": md5Base64([]byte(body))})
	if code != 200 || strings.Count(resp, "<Deleted>") != 2 {
		t.Errorf("DeleteObjects (not quiet): %d %s", code, resp)
	}
	code, resp = signedRequest(t, d, http.MethodPost, "/other?delete", []byte("<Delete>"), map[string]string{"Content-MD5": md5Base64([]byte("<Delete>"))})
	if code != 400 || !strings.Contains(resp, "MalformedXML") {
		t.Errorf("bad DeleteObjects body: %d %s", code, resp)
	}
}

func testConditionalWrites(t *testing.T, d *devCluster, c *minio.Client) {
	opts := minio.PutObjectOptions{}
	opts.SetMatchETagExcept("*")
	if _, err := c.PutObject(ctx(t), "mpu", "cond", bytes.NewReader([]byte("v1")), 2, opts); err != nil {
		t.Fatalf("If-None-Match on a new key: %v", err)
	}
	_, err := c.PutObject(ctx(t), "mpu", "cond", bytes.NewReader([]byte("v2")), 2, opts)
	if code := minio.ToErrorResponse(err).Code; code != "PreconditionFailed" {
		t.Errorf("If-None-Match on an existing key: %v, want PreconditionFailed", err)
	}
	st, err := c.StatObject(ctx(t), "mpu", "cond", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := minio.PutObjectOptions{}
	m.SetMatchETag(strings.Repeat("1", 32))
	_, err = c.PutObject(ctx(t), "mpu", "cond", bytes.NewReader([]byte("v3")), 2, m)
	if code := minio.ToErrorResponse(err).Code; code != "PreconditionFailed" {
		t.Errorf("If-Match with a stale ETag: %v, want PreconditionFailed", err)
	}
	m.SetMatchETag(st.ETag)
	if _, err := c.PutObject(ctx(t), "mpu", "cond", bytes.NewReader([]byte("v4")), 2, m); err != nil {
		t.Errorf("If-Match with the current ETag: %v", err)
	}
	_, err = c.PutObject(ctx(t), "mpu", "cond-missing", bytes.NewReader([]byte("v")), 1, m)
	if code := minio.ToErrorResponse(err).Code; code != "NoSuchKey" {
		t.Errorf("If-Match on a missing key: %v, want NoSuchKey", err)
	}

	// Racing create-only writers: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, lost := 0, 0
	for i := range 8 {
		wg.Go(func() {
			body := []byte(fmt.Sprintf("writer %d", i))
			_, err := c.PutObject(ctx(t), "mpu", "race", bytes.NewReader(body), int64(len(body)), opts)
			mu.Lock()
			defer mu.Unlock()
			switch code := minio.ToErrorResponse(err).Code; {
			case err == nil:
				wins++
			case code == "PreconditionFailed" || code == "ConditionalRequestConflict":
				lost++
			default:
				t.Errorf("racing writer: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || lost != 7 {
		t.Errorf("8 racing If-None-Match writers: %d won, %d lost; want 1 and 7", wins, lost)
	}
}

func testChecksums(t *testing.T, d *devCluster) {
	data := []byte("checksummed body")
	sum := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	good := base64.StdEncoding.EncodeToString(crc32Bytes(sum))
	bad := base64.StdEncoding.EncodeToString(crc32Bytes(sum + 1))
	code, body := signedRequest(t, d, http.MethodPut, "/mpu/ck", data, map[string]string{"x-amz-checksum-crc32c": bad})
	if code != 400 || !strings.Contains(body, "BadDigest") {
		t.Errorf("bad CRC32C: %d %s", code, body)
	}
	if code, _ := signedRequest(t, d, http.MethodGet, "/mpu/ck", nil, nil); code != 404 {
		t.Errorf("object with a bad checksum was stored (GET %d)", code)
	}
	if code, body := signedRequest(t, d, http.MethodPut, "/mpu/ck", data, map[string]string{"x-amz-checksum-crc32c": good}); code != 200 {
		t.Fatalf("good CRC32C: %d %s", code, body)
	}
	h := headers(t, d, "/mpu/ck", map[string]string{"x-amz-checksum-mode": "ENABLED"})
	if h.Get("x-amz-checksum-crc32c") != good {
		t.Errorf("HEAD with checksum mode: x-amz-checksum-crc32c %q, want %q", h.Get("x-amz-checksum-crc32c"), good)
	}
	// A range gets no whole-object checksum: clients (the aws CLI splits
	// large downloads into ranges) would check it against their part.
	resp := doSigned(t, d, http.MethodGet, "/mpu/ck", nil, map[string]string{"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-3"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || resp.Header.Get("x-amz-checksum-crc32c") != "" {
		t.Errorf("ranged GET with checksum mode: %d, x-amz-checksum-crc32c %q; want 206 and none", resp.StatusCode, resp.Header.Get("x-amz-checksum-crc32c"))
	}
	// minio-go with trailing checksums (aws-chunked, unsigned trailer).
	tc, err := minio.New(strings.TrimPrefix(d.info.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(d.info.AccessKey, d.info.SecretKey, ""), Region: "us-east-1", TrailingHeaders: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	big := randomData(3<<20, 6)
	if _, err := tc.PutObject(ctx(t), "mpu", "trailer", bytes.NewReader(big), int64(len(big)), minio.PutObjectOptions{Checksum: minio.ChecksumCRC32C, DisableMultipart: true}); err != nil {
		t.Fatalf("PUT with a trailing CRC32C: %v", err)
	}
	if got := get(t, tc, "mpu", "trailer", minio.GetObjectOptions{}); !bytes.Equal(got, big) {
		t.Fatal("trailing-checksum upload reads back wrong")
	}
	want := crc32.Checksum(big, crc32.MakeTable(crc32.Castagnoli))
	if h := headers(t, d, "/mpu/trailer", map[string]string{"x-amz-checksum-mode": "ENABLED"}); h.Get("x-amz-checksum-crc32c") != base64.StdEncoding.EncodeToString(crc32Bytes(want)) {
		t.Errorf("trailing checksum not stored: %q", h.Get("x-amz-checksum-crc32c"))
	}
}

// Sub-resources regen does not implement get NotImplemented and touch
// nothing: they once fell through to the plain operation, so that
// put-object-tagging overwrote the object with the tag XML and
// delete-object-tagging deleted it.
func testSubresources(t *testing.T, d *devCluster, c *minio.Client) {
	data := randomData(100<<10, 21)
	put(t, c, "other", "tagged", data, minio.PutObjectOptions{})
	for _, r := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodGet, "/other/tagged?torrent", nil},
		{http.MethodPost, "/other/tagged?restore", []byte("<RestoreRequest/>")},
		{http.MethodDelete, "/other?website", nil},
		{http.MethodDelete, "/other?analytics", nil},
		{http.MethodPut, "/other?replication", []byte("<ReplicationConfiguration/>")},
	} {
		code, body := signedRequest(t, d, r.method, r.path, r.body, nil)
		if code != http.StatusNotImplemented || !strings.Contains(body, "<Code>NotImplemented</Code>") {
			t.Errorf("%s %s: %d %s; want 501 NotImplemented", r.method, r.path, code, body)
		}
	}
	// A bucket never versioned has only the null version: any other ID
	// is refused as S3 refuses it, and touches nothing.
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		code, body := signedRequest(t, d, method, "/other/tagged?versionId=3HL4kqtJlcpXroDTDmJ", nil, nil)
		if code != http.StatusBadRequest || !strings.Contains(body, "<Code>InvalidArgument</Code>") {
			t.Errorf("%s ?versionId=<other> in an unversioned bucket: %d %s; want 400 InvalidArgument", method, code, body)
		}
	}
	// SSE-KMS is refused, not silently skipped (SSE-S3 and SSE-C are
	// tested in sse_test.go); object lock in a bucket created without
	// it is refused as S3 refuses it (tests/objectlock_test.go).
	for _, r := range []struct {
		h    map[string]string
		code int
		want string
	}{
		{map[string]string{"x-amz-server-side-encryption": "aws:kms"}, http.StatusNotImplemented, "NotImplemented"},
		{map[string]string{"x-amz-object-lock-mode": "GOVERNANCE", "x-amz-object-lock-retain-until-date": "2030-01-01T00:00:00Z"}, http.StatusBadRequest, "InvalidRequest"},
		{map[string]string{"x-amz-object-lock-legal-hold": "ON"}, http.StatusBadRequest, "InvalidRequest"},
	} {
		if code, body := signedRequest(t, d, http.MethodPut, "/other/tagged", []byte("plain"), r.h); code != r.code || !strings.Contains(body, "<Code>"+r.want+"</Code>") {
			t.Errorf("PUT with %v: %d %s; want %d %s", r.h, code, body, r.code, r.want)
		}
		if code, body := signedRequest(t, d, http.MethodPost, "/other/sse?uploads", nil, r.h); code != r.code || !strings.Contains(body, "<Code>"+r.want+"</Code>") {
			t.Errorf("CreateMultipartUpload with %v: %d %s; want %d %s", r.h, code, body, r.code, r.want)
		}
	}
	if code, body := signedRequest(t, d, http.MethodPut, "/other/tagged?retention", []byte("<Retention/>"), nil); code != http.StatusBadRequest || !strings.Contains(body, "<Code>InvalidRequest</Code>") {
		t.Errorf("PUT ?retention in a bucket without object lock: %d %s; want 400 InvalidRequest", code, body)
	}
	// An SSE-C request without its key is refused, not stored in clear.
	if code, body := signedRequest(t, d, http.MethodPut, "/other/tagged", []byte("plain"), map[string]string{"x-amz-server-side-encryption-customer-algorithm": "AES256"}); code != http.StatusBadRequest {
		t.Errorf("PUT with an SSE-C algorithm and no key: %d %s; want 400", code, body)
	}
	if got := get(t, c, "other", "tagged", minio.GetObjectOptions{}); !bytes.Equal(got, data) {
		t.Fatalf("the object changed after the rejected sub-resource requests (%d bytes)", len(got))
	}
	if ok, err := c.BucketExists(ctx(t), "other"); err != nil || !ok {
		t.Fatalf("bucket other after DELETE ?website: exists %v, %v", ok, err)
	}
	// Neutral parameters still reach the operation: the current version
	// as versionId=null, and the x-id hint some SDKs add.
	for _, path := range []string{"/other/tagged?versionId=null", "/other/tagged?x-id=GetObject"} {
		if code, body := signedRequest(t, d, http.MethodGet, path, nil, nil); code != 200 || body != string(data) {
			t.Errorf("GET %s: %d (%d bytes)", path, code, len(body))
		}
	}
}

// PUT ?acl takes the canned ACLs regen enforces (private, public-read,
// authenticated-read, or their grants in a body) and refuses any grant it
// could not honour (public-read-write, x-amz-grant-*, grants to e-mail
// addresses), instead of answering 200 as it once did. A request
// signed for another region is told the right one, so that s3cmd with its
// default region ("US") finds its way.
func testACLAndRegion(t *testing.T, d *devCluster, c *minio.Client) {
	put(t, c, "other", "acl", []byte("acl target"), minio.PutObjectOptions{})
	owner := `<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>regenadmin</ID></Owner><AccessControlList>` +
		`<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"><ID>regenadmin</ID></Grantee><Permission>FULL_CONTROL</Permission></Grant>`
	public := owner + `<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group"><URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee><Permission>READ</Permission></Grant>`
	for _, r := range []struct {
		path string
		body string
		hdr  map[string]string
		code int
	}{
		{"/other/acl?acl", "", map[string]string{"x-amz-acl": "private"}, 200},
		{"/other/acl?acl", owner + `</AccessControlList></AccessControlPolicy>`, nil, 200},
		{"/other?acl", "", map[string]string{"x-amz-acl": "private"}, 200},
		{"/other/acl?acl", "", map[string]string{"x-amz-acl": "public-read-write"}, 501},
		{"/other/acl?acl", public + `<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group"><URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee><Permission>WRITE</Permission></Grant></AccessControlList></AccessControlPolicy>`, nil, 501},
		{"/other/acl?acl", "", map[string]string{"x-amz-grant-read": `uri="http://acs.amazonaws.com/groups/global/AllUsers"`}, 501},
		{"/other?acl", "", map[string]string{"x-amz-acl": "public-read-write"}, 501},
		{"/other/no-such-key?acl", "", map[string]string{"x-amz-acl": "private"}, 404},
		// The same rule on writes: objects, uploads and buckets.
		{"/other/acl", "x", map[string]string{"x-amz-acl": "public-read-write"}, 501},
		{"/other/acl", "x", map[string]string{"x-amz-grant-full-control": `id="someone-else"`}, 501},
		{"/other/acl2", "x", map[string]string{"x-amz-acl": "bucket-owner-full-control"}, 200},
		{"/aclbucket", "", map[string]string{"x-amz-acl": "public-read-write"}, 501},
	} {
		if code, body := signedRequest(t, d, http.MethodPut, r.path, []byte(r.body), r.hdr); code != r.code {
			t.Errorf("PUT %s %v: %d %s; want %d", r.path, r.hdr, code, body, r.code)
		}
	}
	if code, body := signedRequest(t, d, http.MethodPost, "/other/acl3?uploads", nil, map[string]string{"x-amz-acl": "public-read-write"}); code != 501 {
		t.Errorf("CreateMultipartUpload public-read-write: %d %s; want 501", code, body)
	}
	if got := get(t, c, "other", "acl", minio.GetObjectOptions{}); string(got) != "acl target" {
		t.Errorf("object after refused writes: %q", got)
	}
	if ok, _ := c.BucketExists(ctx(t), "aclbucket"); ok {
		t.Error("bucket created though its public-read-write ACL was refused")
	}
	// The body with an AllUsers READ grant made it public-read.
	if code, body := signedRequest(t, d, http.MethodPut, "/other/acl?acl", []byte(public+`</AccessControlList></AccessControlPolicy>`), nil); code != 200 {
		t.Errorf("PUT ?acl with AllUsers READ: %d %s", code, body)
	}
	if code, body := signedRequest(t, d, http.MethodGet, "/other/acl?acl", nil, nil); code != 200 || !strings.Contains(body, "FULL_CONTROL") || !strings.Contains(body, "AllUsers") {
		t.Errorf("GET ?acl: %d %s", code, body)
	}

	req, err := http.NewRequest(http.MethodGet, d.info.Endpoint+"/other/acl", nil)
	if err != nil {
		t.Fatal(err)
	}
	sigv4.Sign(req, d.info.AccessKey, d.info.SecretKey, "US", time.Now(), sha(nil))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "<Region>us-east-1</Region>") || resp.Header.Get("x-amz-bucket-region") != "us-east-1" {
		t.Errorf("request signed for region US: %d, x-amz-bucket-region %q, %s; want 400 naming us-east-1",
			resp.StatusCode, resp.Header.Get("x-amz-bucket-region"), body)
	}
}

// GET and HEAD with ?partNumber=N serve part N of a multipart object, as
// SDK downloaders that fetch parts in parallel use them.
func testPartNumber(t *testing.T, d *devCluster, c *minio.Client, core *minio.Core) {
	sizes := []int64{5 << 20, 5 << 20, 1<<20 + 3}
	id, err := core.NewMultipartUpload(ctx(t), "mpu", "parts", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	small := randomData(70<<10, 29)
	put(t, c, "mpu", "single", small, minio.PutObjectOptions{})
	var whole []byte
	var done []minio.CompletePart
	for i, n := range sizes {
		p := randomData(n, uint64(30+i))
		whole = append(whole, p...)
		info, err := core.PutObjectPart(ctx(t), "mpu", "parts", id, i+1, bytes.NewReader(p), n, minio.PutObjectPartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, minio.CompletePart{PartNumber: i + 1, ETag: info.ETag})
	}
	if _, err := core.CompleteMultipartUpload(ctx(t), "mpu", "parts", id, done, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	var off int64
	for i, n := range sizes {
		opts := minio.GetObjectOptions{PartNumber: i + 1}
		if got := get(t, c, "mpu", "parts", opts); !bytes.Equal(got, whole[off:off+n]) {
			t.Errorf("part %d: %d bytes, not the part's %d", i+1, len(got), n)
		}
		resp := doSigned(t, d, http.MethodHead, fmt.Sprintf("/mpu/parts?partNumber=%d", i+1), nil, nil)
		resp.Body.Close()
		wantRange := fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, len(whole))
		if resp.StatusCode != http.StatusPartialContent || resp.ContentLength != n || resp.Header.Get("Content-Range") != wantRange || resp.Header.Get("x-amz-mp-parts-count") != "3" {
			t.Errorf("HEAD part %d: %d, length %d, range %q, parts %q; want 206, %d, %q, 3", i+1, resp.StatusCode, resp.ContentLength,
				resp.Header.Get("Content-Range"), resp.Header.Get("x-amz-mp-parts-count"), n, wantRange)
		}
		off += n
	}
	for _, r := range []struct {
		path, rng string
		code      int
		s3code    string
	}{
		{"/mpu/parts?partNumber=4", "", 416, "InvalidPartNumber"},
		{"/mpu/parts?partNumber=0", "", 400, "InvalidArgument"},
		{"/mpu/parts?partNumber=1", "bytes=0-9", 400, "InvalidRequest"},
		{"/mpu/single?partNumber=2", "", 416, "InvalidPartNumber"},
	} {
		var hdr map[string]string
		if r.rng != "" {
			hdr = map[string]string{"Range": r.rng}
		}
		if code, body := signedRequest(t, d, http.MethodGet, r.path, nil, hdr); code != r.code || !strings.Contains(body, "<Code>"+r.s3code+"</Code>") {
			t.Errorf("GET %s (Range %q): %d %s; want %d %s", r.path, r.rng, code, body, r.code, r.s3code)
		}
	}
	// A single-PUT object is its own only part, an empty one too.
	if got := get(t, c, "mpu", "single", minio.GetObjectOptions{PartNumber: 1}); !bytes.Equal(got, small) {
		t.Errorf("part 1 of a single-PUT object: %d bytes, want %d", len(got), len(small))
	}
	put(t, c, "mpu", "empty", nil, minio.PutObjectOptions{})
	if code, body := signedRequest(t, d, http.MethodGet, "/mpu/empty?partNumber=1", nil, nil); code != 200 || body != "" {
		t.Errorf("part 1 of an empty object: %d %q; want 200 and no bytes", code, body)
	}
}

func md5Base64(b []byte) string {
	s := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

func crc32Bytes(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// signedRequest sends a SigV4-signed request with a body and headers.
func signedRequest(t testing.TB, d *devCluster, method, path string, body []byte, hdr map[string]string) (int, string) {
	t.Helper()
	resp := doSigned(t, d, method, path, body, hdr)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func headers(t testing.TB, d *devCluster, path string, hdr map[string]string) http.Header {
	t.Helper()
	resp := doSigned(t, d, http.MethodHead, path, nil, hdr)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HEAD %s: %d", path, resp.StatusCode)
	}
	return resp.Header
}

func doSigned(t testing.TB, d *devCluster, method, path string, body []byte, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, d.info.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	sum := sha(body)
	sigv4.Sign(req, d.info.AccessKey, d.info.SecretKey, "us-east-1", time.Now(), sum)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
