package tests

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/tags"
)

// listVersions lists every version of bucket under prefix with minio-go,
// as "key@id" with "*" after the latest and "~" after a delete marker,
// and the version IDs by key@data position.
func listVersions(t *testing.T, c *minio.Client, bucket, prefix string) []minio.ObjectInfo {
	t.Helper()
	var out []minio.ObjectInfo
	for o := range c.ListObjects(ctx(t), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, WithVersions: true}) {
		if o.Err != nil {
			t.Fatalf("list versions of %s/%s: %v", bucket, prefix, o.Err)
		}
		out = append(out, o)
	}
	return out
}

// renderListing prints versions as "key:id(*)(~)", ids replaced by the
// names given in ids (id -> name).
func renderListing(vs []minio.ObjectInfo, ids map[string]string) string {
	var out []string
	for _, v := range vs {
		s := v.Key + ":" + ids[v.VersionID]
		if ids[v.VersionID] == "" {
			s = v.Key + ":?" + v.VersionID
		}
		if v.IsLatest {
			s += "*"
		}
		if v.IsDeleteMarker {
			s += "~"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// TestVersioning runs S3 versioning as a user meets it, with minio-go and
// aws-sdk-go-v2 against regen dev: enable, versions on PUT, copy and
// multipart, reads of old versions, delete markers, removal of versions,
// the null version of a suspended bucket, listings and their pages.
func TestVersioning(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := d.client(t)
	sdk := sdkClient(d)
	if err := c.MakeBucket(ctx(t), "ver", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if cfg, err := c.GetBucketVersioning(ctx(t), "ver"); err != nil || cfg.Status != "" {
		t.Fatalf("new bucket's versioning: %+v %v; want no status", cfg, err)
	}
	// An object from before versioning is the key's null version.
	v0 := []byte("version zero, before versioning")
	if info := put(t, c, "ver", "k", v0, minio.PutObjectOptions{}); info.VersionID != "" {
		t.Fatalf("PUT in an unversioned bucket answered version %q", info.VersionID)
	}
	if err := c.EnableVersioning(ctx(t), "ver"); err != nil {
		t.Fatal(err)
	}
	if cfg, err := c.GetBucketVersioning(ctx(t), "ver"); err != nil || cfg.Status != "Enabled" {
		t.Fatalf("versioning after enabling: %+v %v", cfg, err)
	}

	v1, v2 := []byte("version one"), bytes.Repeat([]byte("version two "), 30000) // v2 striped, not inline
	id1 := put(t, c, "ver", "k", v1, minio.PutObjectOptions{}).VersionID
	id2 := put(t, c, "ver", "k", v2, minio.PutObjectOptions{}).VersionID
	if id1 == "" || id2 == "" || id1 == id2 || id1 == "null" {
		t.Fatalf("version IDs %q, %q", id1, id2)
	}
	ids := map[string]string{"null": "v0", id1: "v1", id2: "v2"}
	if got := get(t, c, "ver", "k", minio.GetObjectOptions{}); !bytes.Equal(got, v2) {
		t.Fatalf("current version: %d bytes, want v2", len(got))
	}
	for id, want := range map[string][]byte{"null": v0, id1: v1, id2: v2} {
		if got := get(t, c, "ver", "k", minio.GetObjectOptions{VersionID: id}); !bytes.Equal(got, want) {
			t.Errorf("GET version %s: %q..., want %s", id, got[:min(len(got), 20)], ids[id])
		}
		st, err := c.StatObject(ctx(t), "ver", "k", minio.StatObjectOptions{VersionID: id})
		if err != nil || st.VersionID != id || st.Size != int64(len(want)) {
			t.Errorf("HEAD version %s: %+v %v", id, st, err)
		}
	}
	if got := renderListing(listVersions(t, c, "ver", ""), ids); got != "k:v2* k:v1 k:v0" {
		t.Fatalf("versions %q, want v2 (latest), v1, v0", got)
	}

	attrs, err := sdk.GetObjectAttributes(ctx(t), &s3.GetObjectAttributesInput{Bucket: aws.String("ver"), Key: aws.String("k"),
		VersionId: aws.String(id1), ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}})
	if err != nil || aws.ToInt64(attrs.ObjectSize) != int64(len(v1)) || aws.ToString(attrs.VersionId) != id1 {
		t.Fatalf("attributes of v1: %+v %v", attrs, err)
	}

	// Tags and ACLs belong to each version: set on v1, which is not
	// current, they read back by its ID and leave v2 as it was.
	oldTags, _ := tags.NewTags(map[string]string{"era": "old"}, true)
	if err := c.PutObjectTagging(ctx(t), "ver", "k", oldTags, minio.PutObjectTaggingOptions{VersionID: id1}); err != nil {
		t.Fatalf("PutObjectTagging of v1: %v", err)
	}
	if got, err := c.GetObjectTagging(ctx(t), "ver", "k", minio.GetObjectTaggingOptions{VersionID: id1}); err != nil || got.ToMap()["era"] != "old" || len(got.ToMap()) != 1 {
		t.Fatalf("GetObjectTagging of v1: %v %v; want era=old", got, err)
	}
	if got, err := c.GetObjectTagging(ctx(t), "ver", "k", minio.GetObjectTaggingOptions{}); err != nil || len(got.ToMap()) != 0 {
		t.Fatalf("GetObjectTagging of the current version after tagging v1: %v %v; want none", got, err)
	}
	if st, err := c.StatObject(ctx(t), "ver", "k", minio.StatObjectOptions{VersionID: id1}); err != nil || st.UserTagCount != 1 {
		t.Fatalf("HEAD of v1 after tagging it: %+v %v; want 1 tag", st, err)
	}
	if got := get(t, c, "ver", "k", minio.GetObjectOptions{VersionID: id1}); !bytes.Equal(got, v1) {
		t.Fatal("v1's data changed with its tags")
	}
	never := "0000000000000007.gw"
	if code, body := signedRequest(t, d, http.MethodGet, "/ver/k?tagging&versionId="+never, nil, nil); code != 404 || !strings.Contains(body, "NoSuchVersion") {
		t.Fatalf("GET ?tagging of a version never written: %d %s; want 404 NoSuchVersion", code, body)
	}
	if code, body := signedRequest(t, d, http.MethodPut, "/ver/k?acl&versionId="+id1, nil, map[string]string{"x-amz-acl": "public-read"}); code != 200 {
		t.Fatalf("PUT ?acl public-read of v1: %d %s", code, body)
	}
	if code, body := signedRequest(t, d, http.MethodGet, "/ver/k?acl&versionId="+id1, nil, nil); code != 200 || !strings.Contains(body, "AllUsers") {
		t.Fatalf("GET ?acl of v1: %d %s; want a grant to AllUsers", code, body)
	}
	if code, body := anonymous(t, d, http.MethodGet, "/ver/k?versionId="+id1, nil); code != 200 || body != string(v1) {
		t.Fatalf("anonymous GET of public-read v1: %d %.40q", code, body)
	}
	if code, _ := anonymous(t, d, http.MethodGet, "/ver/k?versionId="+id2, nil); code != 403 {
		t.Fatalf("anonymous GET of private v2: %d, want 403", code)
	}

	// DELETE adds a delete marker: the key is gone, its versions stay.
	if err := c.RemoveObject(ctx(t), "ver", "k", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	resp := doSigned(t, d, http.MethodGet, "/ver/k", nil, nil)
	resp.Body.Close()
	marker := resp.Header.Get("x-amz-version-id")
	if resp.StatusCode != 404 || resp.Header.Get("x-amz-delete-marker") != "true" || marker == "" {
		t.Fatalf("GET under a delete marker: %d, headers %v; want 404 with x-amz-delete-marker and its version", resp.StatusCode, resp.Header)
	}
	ids[marker] = "dm"
	if got := renderListing(listVersions(t, c, "ver", ""), ids); got != "k:dm*~ k:v2 k:v1 k:v0" {
		t.Fatalf("versions after DELETE %q", got)
	}
	if code, body := signedRequest(t, d, http.MethodGet, "/ver/k?versionId="+marker, nil, nil); code != 405 || !strings.Contains(body, "MethodNotAllowed") {
		t.Fatalf("GET of the delete marker by ID: %d %s; want 405", code, body)
	}
	if got := get(t, c, "ver", "k", minio.GetObjectOptions{VersionID: id1}); !bytes.Equal(got, v1) {
		t.Fatal("v1 unreadable under the delete marker")
	}
	if code, body := signedRequest(t, d, http.MethodPut, "/ver/k?tagging&versionId="+marker, []byte(`<Tagging><TagSet></TagSet></Tagging>`), nil); code != 405 || !strings.Contains(body, "MethodNotAllowed") {
		t.Fatalf("PUT ?tagging of the delete marker by ID: %d %s; want 405", code, body)
	}
	if got, err := c.GetObjectTagging(ctx(t), "ver", "k", minio.GetObjectTaggingOptions{VersionID: id1}); err != nil || got.ToMap()["era"] != "old" {
		t.Fatalf("GetObjectTagging of v1 under the delete marker: %v %v", got, err)
	}
	// Removing the marker brings the object back.
	if err := c.RemoveObject(ctx(t), "ver", "k", minio.RemoveObjectOptions{VersionID: marker}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "ver", "k", minio.GetObjectOptions{}); !bytes.Equal(got, v2) {
		t.Fatal("the object did not come back when its delete marker was removed")
	}
	// Removing a version removes it for good.
	if err := c.RemoveObject(ctx(t), "ver", "k", minio.RemoveObjectOptions{VersionID: id1}); err != nil {
		t.Fatal(err)
	}
	if code, body := signedRequest(t, d, http.MethodGet, "/ver/k?versionId="+id1, nil, nil); code != 404 || !strings.Contains(body, "NoSuchVersion") {
		t.Fatalf("GET of a removed version: %d %s; want 404 NoSuchVersion", code, body)
	}
	if got := renderListing(listVersions(t, c, "ver", ""), ids); got != "k:v2* k:v0" {
		t.Fatalf("versions after removing v1 %q", got)
	}

	// CopyObject from an old version, and a multipart upload, are new
	// versions that say so.
	cp, err := c.CopyObject(ctx(t), minio.CopyDestOptions{Bucket: "ver", Object: "copy"}, minio.CopySrcOptions{Bucket: "ver", Object: "k", VersionID: "null"})
	if err != nil || cp.VersionID == "" || cp.VersionID == "null" {
		t.Fatalf("copy of the null version: %+v %v", cp, err)
	}
	if got := get(t, c, "ver", "copy", minio.GetObjectOptions{}); !bytes.Equal(got, v0) {
		t.Fatal("the copy of the null version has other data")
	}
	big := randomData(6<<20, 31)
	mp := put(t, c, "ver", "mp", big, minio.PutObjectOptions{PartSize: 5 << 20})
	if mp.VersionID == "" || mp.VersionID == "null" {
		t.Fatalf("multipart upload in a versioned bucket: version %q", mp.VersionID)
	}
	if got := get(t, c, "ver", "mp", minio.GetObjectOptions{VersionID: mp.VersionID}); !bytes.Equal(got, big) {
		t.Fatal("multipart version unreadable by its ID")
	}

	// Suspended: a PUT replaces only the null version.
	if err := c.SuspendVersioning(ctx(t), "ver"); err != nil {
		t.Fatal(err)
	}
	if cfg, err := c.GetBucketVersioning(ctx(t), "ver"); err != nil || cfg.Status != "Suspended" {
		t.Fatalf("versioning after suspending: %+v %v", cfg, err)
	}
	v3 := []byte("version three, suspended")
	if info := put(t, c, "ver", "k", v3, minio.PutObjectOptions{}); info.VersionID != "null" {
		t.Fatalf("PUT in a suspended bucket: version %q, want null", info.VersionID)
	}
	if got := renderListing(listVersions(t, c, "ver", "k"), ids); got != "k:v0* k:v2" {
		t.Fatalf("versions after a suspended PUT %q; want the null version (now v3) latest, then v2", got)
	}
	if got := get(t, c, "ver", "k", minio.GetObjectOptions{VersionID: "null"}); !bytes.Equal(got, v3) {
		t.Fatal("the null version is not the suspended PUT")
	}
	if got := get(t, c, "ver", "k", minio.GetObjectOptions{VersionID: id2}); !bytes.Equal(got, v2) {
		t.Fatal("v2 lost to a suspended PUT")
	}

	// The same listing, one entry per page, with aws-sdk-go-v2's markers.
	var paged []string
	in := &s3.ListObjectVersionsInput{Bucket: aws.String("ver"), MaxKeys: aws.Int32(1)}
	for range 20 {
		out, err := sdk.ListObjectVersions(ctx(t), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.Versions {
			paged = append(paged, aws.ToString(v.Key)+":"+aws.ToString(v.VersionId))
		}
		for _, m := range out.DeleteMarkers {
			paged = append(paged, aws.ToString(m.Key)+":"+aws.ToString(m.VersionId)+"~")
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	var whole []string
	for _, v := range listVersions(t, c, "ver", "") {
		whole = append(whole, v.Key+":"+v.VersionID)
	}
	if !slices.Equal(paged, whole) || len(whole) != 4 {
		t.Fatalf("paged listing %v, whole %v", paged, whole)
	}

	// A bucket never versioned still answers as before.
	if err := c.MakeBucket(ctx(t), "plain", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	put(t, c, "plain", "p", []byte("p"), minio.PutObjectOptions{})
	if got := renderListing(listVersions(t, c, "plain", ""), map[string]string{"null": "null"}); got != "p:null*" {
		t.Fatalf("unversioned listing %q", got)
	}
	resp = doSigned(t, d, http.MethodDelete, "/plain/p", nil, nil)
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("x-amz-delete-marker") != "" || resp.Header.Get("x-amz-version-id") != "" {
		t.Fatalf("DELETE in an unversioned bucket: %d %v", resp.StatusCode, resp.Header)
	}
	// Old versions keep their erasure-coded stripes: with m = 3 shard
	// servers killed (rs-6-3), every version still reads byte-exact
	// (degraded) and the listing is whole.
	for i := range 3 {
		d.killShard(i)
	}
	for id, want := range map[string][]byte{id2: v2, "null": v3} {
		if got := get(t, c, "ver", "k", minio.GetObjectOptions{VersionID: id}); !bytes.Equal(got, want) {
			t.Errorf("version %s with 3 shard servers killed: %d bytes, want %d", id, len(got), len(want))
		}
	}
	if got := get(t, c, "ver", "mp", minio.GetObjectOptions{VersionID: mp.VersionID}); !bytes.Equal(got, big) {
		t.Error("multipart version unreadable with 3 shard servers killed")
	}
	if got := len(listVersions(t, c, "ver", "")); got != len(whole) {
		t.Errorf("%d versions listed with 3 shard servers killed, want %d", got, len(whole))
	}
	// A bucket never returns to unversioned.
	if code, body := signedRequest(t, d, http.MethodPut, "/ver?versioning", []byte(`<VersioningConfiguration><Status></Status></VersioningConfiguration>`), nil); code != 400 || !strings.Contains(body, "MalformedXML") {
		t.Fatalf("PUT versioning with no status: %d %s; want 400 MalformedXML", code, body)
	}
}

// TestVersionedDeleteObjects: DeleteObjects without version IDs in a
// versioned bucket adds a delete marker to every key named, as S3 does
// (over a live version, over a marker, over a key never written), answers
// each marker's version ID, and keeps the versions under them; in a
// suspended bucket the markers are null versions. The markers are written
// in batches per shard server (gateway.deleteMarkers).
func TestVersionedDeleteObjects(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := d.client(t)
	sdk := sdkClient(d)
	for _, status := range []string{"Enabled", "Suspended"} {
		bucket := "vdo-" + strings.ToLower(status)
		if err := c.MakeBucket(ctx(t), bucket, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := sdk.PutBucketVersioning(ctx(t), &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatus(status)}}); err != nil {
			t.Fatal(err)
		}
		var objs []types.ObjectIdentifier
		under := map[string]string{} // key -> the version ID under the marker
		for i := range 40 {
			k := fmt.Sprintf("k%02d", i)
			objs = append(objs, types.ObjectIdentifier{Key: aws.String(k)})
			if i == 39 {
				continue // never written
			}
			under[k] = put(t, c, bucket, k, []byte(k), minio.PutObjectOptions{}).VersionID
			if i%10 == 0 { // already under a marker
				if err := c.RemoveObject(ctx(t), bucket, k, minio.RemoveObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		out, err := sdk.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: objs}})
		if err != nil || len(out.Errors) != 0 || len(out.Deleted) != len(objs) {
			t.Fatalf("%s: DeleteObjects of %d keys: %d deleted, errors %+v, %v", status, len(objs), len(out.Deleted), out.Errors, err)
		}
		markers := map[string]string{}
		for _, del := range out.Deleted {
			id := aws.ToString(del.DeleteMarkerVersionId)
			if !aws.ToBool(del.DeleteMarker) || id == "" || (status == "Suspended") != (id == "null") {
				t.Fatalf("%s: %s answered marker %v, ID %q", status, aws.ToString(del.Key), aws.ToBool(del.DeleteMarker), id)
			}
			markers[aws.ToString(del.Key)] = id
		}
		for _, o := range listVersions(t, c, bucket, "") {
			if o.IsLatest && (!o.IsDeleteMarker || o.VersionID != markers[o.Key]) {
				t.Errorf("%s: latest of %s is %s (marker %v), want the marker %s", status, o.Key, o.VersionID, o.IsDeleteMarker, markers[o.Key])
			}
		}
		if _, err := c.StatObject(ctx(t), bucket, "k05", minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
			t.Fatalf("%s: HEAD of a deleted key: %v; want NoSuchKey", status, err)
		}
		if status == "Enabled" {
			// The versions stay under their markers.
			for _, k := range []string{"k05", "k20", "k38"} {
				if got := get(t, c, bucket, k, minio.GetObjectOptions{VersionID: under[k]}); string(got) != k {
					t.Errorf("version %s of %s after DeleteObjects: %q", under[k], k, got)
				}
			}
		}
	}
}
