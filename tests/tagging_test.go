package tests

import (
	"bytes"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/tags"
)

func tagMap(ts []types.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range ts {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// TestTagging covers object tags on PUT, copy, multipart and by the
// tagging API, their limits, and bucket tags, through aws-sdk-go-v2 and
// minio-go.
func TestTagging(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := sdkClient(d)
	mc := d.client(t)
	b := aws.String("tags")
	if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	objTags := func(key string) map[string]string {
		t.Helper()
		out, err := c.GetObjectTagging(ctx(t), &s3.GetObjectTaggingInput{Bucket: b, Key: aws.String(key)})
		if err != nil {
			t.Fatalf("GetObjectTagging %s: %v", key, err)
		}
		return tagMap(out.TagSet)
	}

	// PUT with x-amz-tagging; the count comes back on GET and HEAD.
	data := randomData(300<<10, 50) // striped, not inline
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: b, Key: aws.String("obj"), Body: bytes.NewReader(data), Tagging: aws.String("project=regen&path=a/b c")}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"project": "regen", "path": "a/b c"}
	if got := objTags("obj"); !maps.Equal(got, want) {
		t.Errorf("tags of obj: %v, want %v", got, want)
	}
	h, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: b, Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: b, Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	g.Body.Close()
	if aws.ToInt32(g.TagCount) != 2 {
		t.Errorf("GET TagCount %d, want 2", aws.ToInt32(g.TagCount))
	}
	if hdr := headers(t, d, "/tags/obj", nil); hdr.Get("x-amz-tagging-count") != "2" {
		t.Errorf("HEAD x-amz-tagging-count %q", hdr.Get("x-amz-tagging-count"))
	}

	// PutObjectTagging replaces the tags, keeps the data, ETag and date.
	if _, err := c.PutObjectTagging(ctx(t), &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("obj"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}, {Key: aws.String("empty"), Value: aws.String("")}}}}); err != nil {
		t.Fatal(err)
	}
	if got := objTags("obj"); !maps.Equal(got, map[string]string{"k": "v", "empty": ""}) {
		t.Errorf("after PutObjectTagging: %v", got)
	}
	if got := get(t, mc, "tags", "obj", minio.GetObjectOptions{}); !bytes.Equal(got, data) {
		t.Fatal("data changed by PutObjectTagging")
	}
	h2, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: b, Key: aws.String("obj")})
	if err != nil || aws.ToString(h2.ETag) != aws.ToString(h.ETag) || !aws.ToTime(h2.LastModified).Equal(aws.ToTime(h.LastModified)) {
		t.Errorf("ETag/Last-Modified after tagging: %v %s %v; want %s %v", err, aws.ToString(h2.ETag), h2.LastModified, aws.ToString(h.ETag), h.LastModified)
	}

	// Copy: COPY keeps the source's tags, REPLACE takes the request's.
	if _, err := c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: b, Key: aws.String("copy"), CopySource: aws.String("tags/obj")}); err != nil {
		t.Fatal(err)
	}
	if got := objTags("copy"); !maps.Equal(got, map[string]string{"k": "v", "empty": ""}) {
		t.Errorf("copy (COPY) tags: %v", got)
	}
	if _, err := c.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: b, Key: aws.String("copy2"), CopySource: aws.String("tags/obj"),
		TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("new=1")}); err != nil {
		t.Fatal(err)
	}
	if got := objTags("copy2"); !maps.Equal(got, map[string]string{"new": "1"}) {
		t.Errorf("copy (REPLACE) tags: %v", got)
	}

	// Multipart: the tags given at CreateMultipartUpload (minio-go).
	big := randomData(6<<20, 51)
	if _, err := mc.PutObject(ctx(t), "tags", "mp", bytes.NewReader(big), int64(len(big)), minio.PutObjectOptions{PartSize: 5 << 20, UserTags: map[string]string{"mp": "yes"}}); err != nil {
		t.Fatal(err)
	}
	mt, err := mc.GetObjectTagging(ctx(t), "tags", "mp", minio.GetObjectTaggingOptions{})
	if err != nil || !maps.Equal(mt.ToMap(), map[string]string{"mp": "yes"}) {
		t.Errorf("multipart object's tags: %v %v", err, mt)
	}
	// minio-go's tagging calls.
	nt, _ := tags.NewTags(map[string]string{"via": "minio-go"}, true)
	if err := mc.PutObjectTagging(ctx(t), "tags", "mp", nt, minio.PutObjectTaggingOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mc.RemoveObjectTagging(ctx(t), "tags", "mp", minio.RemoveObjectTaggingOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := objTags("mp"); len(got) != 0 {
		t.Errorf("tags after RemoveObjectTagging: %v", got)
	}
	if got := get(t, mc, "tags", "mp", minio.GetObjectOptions{}); !bytes.Equal(got, big) {
		t.Fatal("multipart data changed by tagging")
	}

	// S3's limits, with its error codes; a refused request changes nothing.
	many := make([]types.Tag, 11)
	for i := range many {
		many[i] = types.Tag{Key: aws.String(strings.Repeat("k", i+1)), Value: aws.String("v")}
	}
	for _, r := range []struct {
		tags []types.Tag
		code string
	}{
		{many, "BadRequest"},
		{[]types.Tag{{Key: aws.String(strings.Repeat("k", 129)), Value: aws.String("v")}}, "InvalidTag"},
		{[]types.Tag{{Key: aws.String("k"), Value: aws.String(strings.Repeat("v", 257))}}, "InvalidTag"},
		{[]types.Tag{{Key: aws.String("aws:reserved"), Value: aws.String("v")}}, "InvalidTag"},
		{[]types.Tag{{Key: aws.String("bad<char>"), Value: aws.String("v")}}, "InvalidTag"},
		{[]types.Tag{{Key: aws.String("dup"), Value: aws.String("1")}, {Key: aws.String("dup"), Value: aws.String("2")}}, "InvalidTag"},
	} {
		_, err := c.PutObjectTagging(ctx(t), &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("copy2"), Tagging: &types.Tagging{TagSet: r.tags}})
		if apiCode(err) != r.code {
			t.Errorf("PutObjectTagging %d tags (first key %.20q): %v; want %s", len(r.tags), aws.ToString(r.tags[0].Key), err, r.code)
		}
	}
	if got := objTags("copy2"); !maps.Equal(got, map[string]string{"new": "1"}) {
		t.Errorf("tags after refused changes: %v", got)
	}
	ok128 := map[string]string{strings.Repeat("k", 128): strings.Repeat("é", 256), "+-=._:/@ ok": ""}
	var okSet []types.Tag
	for k, v := range ok128 {
		okSet = append(okSet, types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	if _, err := c.PutObjectTagging(ctx(t), &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("copy2"), Tagging: &types.Tagging{TagSet: okSet}}); err != nil {
		t.Errorf("tags at the limits: %v", err)
	}
	for hdr, code := range map[string]string{
		"a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&j=10&k=11": "BadRequest",
		"a=1&a=2": "InvalidArgument",
		"aws:x=1": "InvalidTag",
	} {
		_, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: b, Key: aws.String("refused"), Body: strings.NewReader("x"), Tagging: aws.String(hdr)})
		if apiCode(err) != code {
			t.Errorf("PutObject x-amz-tagging %q: %v; want %s", hdr, err, code)
		}
	}
	if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: b, Key: aws.String("refused")}); err == nil {
		t.Error("an object was stored though its tags were refused")
	}
	if _, err := c.PutObjectTagging(ctx(t), &s3.PutObjectTaggingInput{Bucket: b, Key: aws.String("missing"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}); apiCode(err) != "NoSuchKey" {
		t.Errorf("tagging a missing key: %v", err)
	}

	// The document has S3's shape.
	if code, body := signedRequest(t, d, http.MethodGet, "/tags/copy?tagging", nil, nil); code != 200 ||
		!strings.Contains(body, `<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet><Tag><Key>empty</Key><Value></Value></Tag><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>`) {
		t.Errorf("GET ?tagging: %d %s", code, body)
	}

	// Bucket tags.
	if _, err := c.GetBucketTagging(ctx(t), &s3.GetBucketTaggingInput{Bucket: b}); apiCode(err) != "NoSuchTagSet" {
		t.Errorf("bucket without tags: %v", err)
	}
	if _, err := c.PutBucketTagging(ctx(t), &s3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("team"), Value: aws.String("storage")}}}}); err != nil {
		t.Fatal(err)
	}
	bt, err := c.GetBucketTagging(ctx(t), &s3.GetBucketTaggingInput{Bucket: b})
	if err != nil || !maps.Equal(tagMap(bt.TagSet), map[string]string{"team": "storage"}) {
		t.Errorf("bucket tags: %v %v", err, bt)
	}
	fifty := make([]types.Tag, 51)
	for i := range fifty {
		fifty[i] = types.Tag{Key: aws.String(strings.Repeat("b", i+1)), Value: aws.String("v")}
	}
	if _, err := c.PutBucketTagging(ctx(t), &s3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: fifty}}); apiCode(err) != "BadRequest" {
		t.Errorf("51 bucket tags: %v", err)
	}
	if _, err := c.PutBucketTagging(ctx(t), &s3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: fifty[:50]}}); err != nil {
		t.Errorf("50 bucket tags: %v", err)
	}
	if _, err := c.DeleteBucketTagging(ctx(t), &s3.DeleteBucketTaggingInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketTagging(ctx(t), &s3.GetBucketTaggingInput{Bucket: b}); apiCode(err) != "NoSuchTagSet" {
		t.Errorf("bucket tags after delete: %v", err)
	}
	// The bucket and its objects are untouched by bucket tagging.
	if ok, err := mc.BucketExists(ctx(t), "tags"); !ok || err != nil {
		t.Fatalf("bucket after DeleteBucketTagging: %v %v", ok, err)
	}
}
