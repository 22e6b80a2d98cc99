package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestBucketPolicy covers bucket policies end to end: public read of a
// prefix (and listing it) for anonymous callers, explicit denies that bind
// access keys too (by action, address, transport), anonymous writes where
// a policy allows them, refusals of what regen cannot enforce, and the
// owner never locked out of the policy itself.
func TestBucketPolicy(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := sdkClient(d)
	b := aws.String("site")
	if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"public/index.html", "public/css/a.css", "private/notes.txt", "protected/keep.txt", "protected/other.txt"} {
		putString(t, c, "site", k, "content of "+k)
	}
	putPolicy := func(doc string) error {
		_, err := c.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(doc)})
		return err
	}
	anon := func(method, path string, wantCode int, want string) {
		t.Helper()
		code, body := anonymous(t, d, method, path, []byte("anonymous body"))
		if code != wantCode || !strings.Contains(body, want) {
			t.Errorf("anonymous %s %s: %d %.200q; want %d with %q", method, path, code, body, wantCode, want)
		}
	}

	if _, err := c.GetBucketPolicy(ctx(t), &s3.GetBucketPolicyInput{Bucket: b}); apiCode(err) != "NoSuchBucketPolicy" {
		t.Errorf("GetBucketPolicy before any: %v", err)
	}
	anon(http.MethodGet, "/site/public/index.html", 403, "AccessDenied")

	// Public read of a prefix, and listing it.
	public := `{"Version":"2012-10-17","Statement":[
	  {"Sid":"PublicRead","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/public/*"},
	  {"Sid":"ListPublic","Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::site",
	   "Condition":{"StringLike":{"s3:prefix":"public/*"}}}]}`
	if err := putPolicy(public); err != nil {
		t.Fatalf("PutBucketPolicy: %v", err)
	}
	got, err := c.GetBucketPolicy(ctx(t), &s3.GetBucketPolicyInput{Bucket: b})
	if err != nil || aws.ToString(got.Policy) != public {
		t.Errorf("GetBucketPolicy: %v %q", err, aws.ToString(got.Policy))
	}
	st, err := c.GetBucketPolicyStatus(ctx(t), &s3.GetBucketPolicyStatusInput{Bucket: b})
	if err != nil || !aws.ToBool(st.PolicyStatus.IsPublic) {
		t.Errorf("GetBucketPolicyStatus: %v %+v", err, st)
	}
	anon(http.MethodGet, "/site/public/index.html", 200, "content of public/index.html")
	anon(http.MethodHead, "/site/public/css/a.css", 200, "")
	anon(http.MethodGet, "/site/private/notes.txt", 403, "AccessDenied")
	anon(http.MethodGet, "/site/public", 403, "AccessDenied") // the key "public" is not under public/
	anon(http.MethodGet, "/site?list-type=2&prefix=public/", 200, "<Key>public/css/a.css</Key>")
	anon(http.MethodGet, "/site?list-type=2", 403, "AccessDenied")
	anon(http.MethodGet, "/site?list-type=2&prefix=private/", 403, "AccessDenied")
	anon(http.MethodPut, "/site/public/new.html", 403, "AccessDenied")
	anon(http.MethodDelete, "/site/public/index.html", 403, "AccessDenied")
	anon(http.MethodGet, "/site?policy", 403, "AccessDenied")
	anon(http.MethodPut, "/site/public/index.html?tagging", 403, "AccessDenied")

	// Refused: what regen cannot enforce; the stored policy stays.
	for _, doc := range []string{
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:user/bob"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*","Condition":{"StringEquals":{"aws:PrincipalOrgID":"o-123"}}}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","NotAction":"s3:DeleteObject","Resource":"arn:aws:s3:::site/*"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::elsewhere/*"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObjekt","Resource":"arn:aws:s3:::site/*"}]}`,
		`not json`,
	} {
		if err := putPolicy(doc); apiCode(err) != "MalformedPolicy" {
			t.Errorf("PutBucketPolicy %.80s: %v; want MalformedPolicy", doc, err)
		}
	}
	if got, _ := c.GetBucketPolicy(ctx(t), &s3.GetBucketPolicyInput{Bucket: b}); aws.ToString(got.Policy) != public {
		t.Error("a refused policy replaced the stored one")
	}

	// Explicit denies bind access keys too.
	protect := `{"Version":"2012-10-17","Statement":[
	  {"Effect":"Deny","Principal":"*","Action":["s3:DeleteObject","s3:PutObject"],"Resource":"arn:aws:s3:::site/protected/*"},
	  {"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/private/*",
	   "Condition":{"NotIpAddress":{"aws:SourceIp":["10.0.0.0/8"]}}}]}`
	if err := putPolicy(protect); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: b, Key: aws.String("protected/keep.txt")}); apiCode(err) != "AccessDenied" {
		t.Errorf("DeleteObject under a Deny: %v", err)
	}
	if _, err := c.PutObject(ctx(t), &s3.PutObjectInput{Bucket: b, Key: aws.String("protected/keep.txt"), Body: strings.NewReader("overwrite")}); apiCode(err) != "AccessDenied" {
		t.Errorf("PutObject under a Deny: %v", err)
	}
	del, err := c.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("protected/other.txt")}, {Key: aws.String("public/css/a.css")}}}})
	if err != nil || len(del.Errors) != 1 || aws.ToString(del.Errors[0].Key) != "protected/other.txt" || aws.ToString(del.Errors[0].Code) != "AccessDenied" ||
		len(del.Deleted) != 1 {
		t.Errorf("DeleteObjects across a Deny: %v %+v", err, del)
	}
	for _, k := range []string{"protected/keep.txt", "protected/other.txt"} {
		if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: b, Key: aws.String(k)}); err != nil {
			t.Errorf("%s after denied deletes: %v", k, err)
		}
	}
	// Requests come from 127.0.0.1, outside 10/8: denied.
	if _, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: b, Key: aws.String("private/notes.txt")}); apiCode(err) != "AccessDenied" {
		t.Errorf("GetObject from outside the allowed addresses: %v", err)
	}
	if _, err := c.GetObject(ctx(t), &s3.GetObjectInput{Bucket: b, Key: aws.String("public/index.html")}); err != nil {
		t.Errorf("GetObject the Deny does not cover: %v", err)
	}
	st, err = c.GetBucketPolicyStatus(ctx(t), &s3.GetBucketPolicyStatusInput{Bucket: b})
	if err != nil || aws.ToBool(st.PolicyStatus.IsPublic) {
		t.Errorf("status of a deny-only policy: %v %+v", err, st)
	}

	// Deny everything over plain HTTP: the owner can still read and
	// remove the policy, and nothing else.
	if err := putPolicy(`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*",
	  "Resource":["arn:aws:s3:::site","arn:aws:s3:::site/*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: b}); apiCode(err) != "AccessDenied" {
		t.Errorf("listing over plain HTTP under a SecureTransport deny: %v", err)
	}
	if _, err := c.GetBucketPolicy(ctx(t), &s3.GetBucketPolicyInput{Bucket: b}); err != nil {
		t.Errorf("GetBucketPolicy under a deny-all: %v", err)
	}
	if _, err := c.DeleteBucketPolicy(ctx(t), &s3.DeleteBucketPolicyInput{Bucket: b}); err != nil {
		t.Fatalf("DeleteBucketPolicy under a deny-all: %v", err)
	}
	if _, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: b}); err != nil {
		t.Errorf("listing after the policy is gone: %v", err)
	}
	if _, err := c.GetBucketPolicy(ctx(t), &s3.GetBucketPolicyInput{Bucket: b}); apiCode(err) != "NoSuchBucketPolicy" {
		t.Errorf("GetBucketPolicy after delete: %v", err)
	}
	anon(http.MethodGet, "/site/public/index.html", 403, "AccessDenied")

	// Anonymous uploads into one prefix, where a policy says so.
	drop, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Principal": "*", "Action": []string{"s3:PutObject", "s3:GetObject"}, "Resource": "arn:aws:s3:::site/dropbox/*"}}})
	if err := putPolicy(string(drop)); err != nil {
		t.Fatal(err)
	}
	anon(http.MethodPut, "/site/dropbox/from-anyone.txt", 200, "")
	anon(http.MethodGet, "/site/dropbox/from-anyone.txt", 200, "anonymous body")
	anon(http.MethodPut, "/site/elsewhere.txt", 403, "AccessDenied")
	anon(http.MethodDelete, "/site/dropbox/from-anyone.txt", 403, "AccessDenied")
	// DeleteObjects is decided per key: not allowed to anonymous here.
	code, body := anonymous(t, d, http.MethodPost, "/site?delete", []byte(`<Delete><Object><Key>dropbox/from-anyone.txt</Key></Object></Delete>`))
	if code != 200 || !strings.Contains(body, "<Code>AccessDenied</Code>") {
		t.Errorf("anonymous DeleteObjects: %d %s", code, body)
	}
	anon(http.MethodGet, "/site/dropbox/from-anyone.txt", 200, "anonymous body")
}
