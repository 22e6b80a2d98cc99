package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// TestAWSSDKGoV2 runs the AWS SDK for Go v2 against regen: it sends
// checksums by default (CRC32), and pages, presigns and uploads parts the
// AWS way.
func TestAWSSDKGoV2(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := s3.New(s3.Options{
		BaseEndpoint: aws.String(d.info.Endpoint),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(d.info.AccessKey, d.info.SecretKey, ""),
		UsePathStyle: true,
	})
	b := aws.String("sdkv2")
	if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}

	// Single PUT with the SDK's default checksum, read back with it.
	small := randomData(300<<10, 10)
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: b, Key: aws.String("a/small"), Body: bytes.NewReader(small)}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	out, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: b, Key: aws.String("a/small"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("GetObject: %d bytes, %v", len(got), err)
	}

	// Multipart, parts with CRC32 checksums.
	data := randomData(11<<20, 11)
	key := aws.String("a/multi part+key")
	mu, err := c.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: b, Key: key, ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil {
		t.Fatal(err)
	}
	var parts []types.CompletedPart
	for i, off := int32(1), 0; off < len(data); i, off = i+1, off+5<<20 {
		body := data[off:min(off+5<<20, len(data))]
		up, err := c.UploadPart(ctx(t), &s3.UploadPartInput{Bucket: b, Key: key, UploadId: mu.UploadId, PartNumber: aws.Int32(i),
			Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", i, err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(i), ETag: up.ETag, ChecksumCRC32: up.ChecksumCRC32})
	}
	done, err := c.CompleteMultipartUpload(ctx(t), &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: mu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	if !strings.HasSuffix(aws.ToString(done.ETag), `-3"`) {
		t.Errorf("multipart ETag %s, want a -3 suffix", aws.ToString(done.ETag))
	}
	rng, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: b, Key: key, Range: aws.String("bytes=5242870-5242889")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(rng.Body)
	rng.Body.Close()
	if !bytes.Equal(got, data[5242870:5242890]) {
		t.Errorf("range across parts: wrong bytes")
	}

	// Copy, paginated listing, presigned GET, multi-delete.
	if _, err := c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: b, Key: aws.String("a/copy"), CopySource: aws.String("sdkv2/a/multi%20part%2Bkey")}); err != nil {
		t.Fatalf("CopyObject: %v", err)
	}
	for i := range 12 {
		if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: b, Key: aws.String(fmt.Sprintf("p/%02d", i)), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	var listed []string
	pg := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: b, MaxKeys: aws.Int32(5)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			listed = append(listed, aws.ToString(o.Key))
		}
	}
	if len(listed) != 15 || listed[0] != "a/copy" || listed[14] != "p/11" {
		t.Errorf("paginated listing: %q", listed)
	}
	ps, err := s3.NewPresignClient(c).PresignGetObject(ctx(t), &s3.GetObjectInput{Bucket: b, Key: aws.String("a/copy")}, s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(ps.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, data) {
		t.Errorf("presigned GET: %d, %d bytes", resp.StatusCode, len(got))
	}
	var ids []types.ObjectIdentifier
	for _, k := range listed {
		ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
	}
	del, err := c.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: ids}})
	if err != nil || len(del.Deleted) != 15 || len(del.Errors) != 0 {
		t.Fatalf("DeleteObjects: %v, %d deleted, errors %v", err, len(del.Deleted), del.Errors)
	}

	// Conditional create.
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: b, Key: aws.String("once"), Body: strings.NewReader("1"), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatal(err)
	}
	_, err = c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: b, Key: aws.String("once"), Body: strings.NewReader("2"), IfNoneMatch: aws.String("*")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "PreconditionFailed" {
		t.Errorf("second If-None-Match PUT: %v, want PreconditionFailed", err)
	}
}
