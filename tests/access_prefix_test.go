package tests

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
)

// TestPrefixRightsAndKeyPolicies: rights narrower than a bucket, and
// bucket policies naming keys, as an operator and two users meet them
// through minio-go and aws-sdk-go-v2. Alice may read and write her
// prefix of a shared bucket and read another: inside them everything
// works (GET, PUT, copy, listings of them, DeleteObjects), outside them
// every call is refused with 403, listings of the whole bucket or of a
// shorter prefix included. Carol has no right at all; a policy naming
// her key (by ARN) lets her read and list one prefix, and nobody else
// gains by it (anonymous callers included); a Deny naming alice's key
// (by access key ID) beats her prefix right. Revoking the prefix right
// takes effect at once on the gateway that made the change.
func TestPrefixRightsAndKeyPolicies(t *testing.T) {
	parallel(t)
	d := startDev(t)
	admin := d.client(t)
	adminSDK := sdkClient(d)
	mustMakeBucket(t, admin, "team")
	for _, k := range []string{"alice/a.txt", "alicex.txt", "bob/b.txt", "shared/s.txt"} {
		put(t, admin, "team", k, []byte("content of "+k), minio.PutObjectOptions{})
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := regenAdmin(t, d.info.Endpoint, d.info.AccessKey, d.info.SecretKey, args...)
		if err != nil {
			t.Fatalf("regen admin %v: %v\n%s", args, err, out)
		}
		return out
	}

	alice := createKey(t, d, "--name", "alice")
	if out := cli("key", "grant", "alice", "--bucket", "team", "--prefix", "alice/", "--right", "read,write"); !strings.Contains(out, "team/alice/:read,write") {
		t.Errorf("key grant --prefix printed %q", out)
	}
	if out := cli("key", "grant", "alice", "--bucket", "team/shared/", "--right", "read"); !strings.Contains(out, "team/shared/:read") {
		t.Errorf("key grant --bucket B/P printed %q", out)
	}
	am := s3Client(t, d.info.Endpoint, alice.AccessKey, alice.SecretKey)
	as := sdkClientAt(d.info.Endpoint, alice)
	denied := func(who, what string, err error) {
		t.Helper()
		code, status := apiCode(err), 0
		if r := minio.ToErrorResponse(err); r.Code != "" {
			code, status = r.Code, r.StatusCode
		}
		if code != "AccessDenied" || (status != 0 && status != 403) {
			t.Errorf("%s %s: %v, want 403 AccessDenied", who, what, err)
		}
	}
	sdkList := func(c *s3.Client, prefix string) ([]string, error) {
		out, err := c.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("team"), Prefix: aws.String(prefix)})
		if err != nil {
			return nil, err
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		return keys, nil
	}
	minioList := func(c *minio.Client, prefix string) ([]string, error) {
		var keys []string
		for o := range c.ListObjects(ctx(t), "team", minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				return keys, o.Err
			}
			keys = append(keys, o.Key)
		}
		return keys, nil
	}

	// Inside her prefixes: allowed.
	if got, err := getBody(am, "team", "alice/a.txt"); err != nil || string(got) != "content of alice/a.txt" {
		t.Errorf("alice GET alice/a.txt (minio-go): %q %v", got, err)
	}
	if _, err := as.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("team"), Key: aws.String("alice/new.txt"), Body: strings.NewReader("new")}); err != nil {
		t.Errorf("alice PutObject alice/new.txt (aws-sdk-go-v2): %v", err)
	}
	if _, err := as.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("team"), Key: aws.String("alice/copy.txt"), CopySource: aws.String("team/shared/s.txt")}); err != nil {
		t.Errorf("alice CopyObject shared/s.txt to alice/copy.txt: %v", err)
	}
	if keys, err := sdkList(as, "alice/"); err != nil || !slices.Equal(keys, []string{"alice/a.txt", "alice/copy.txt", "alice/new.txt"}) {
		t.Errorf("alice ListObjectsV2 alice/ (aws-sdk-go-v2): %q %v", keys, err)
	}
	if keys, err := minioList(am, "shared/"); err != nil || !slices.Equal(keys, []string{"shared/s.txt"}) {
		t.Errorf("alice ListObjects shared/ (minio-go): %q %v", keys, err)
	}
	if got, err := getBody(am, "team", "shared/s.txt"); err != nil || string(got) != "content of shared/s.txt" {
		t.Errorf("alice GET shared/s.txt: %q %v", got, err)
	}
	if ok, err := am.BucketExists(ctx(t), "team"); err != nil || !ok {
		t.Errorf("alice HeadBucket team: %v %v", ok, err)
	}
	if bs, err := am.ListBuckets(ctx(t)); err != nil || len(bs) != 1 || bs[0].Name != "team" {
		t.Errorf("alice ListBuckets: %+v %v; want team", bs, err)
	}

	// Outside them: 403, through both SDKs.
	_, err := getBody(am, "team", "bob/b.txt")
	denied("alice", "GET bob/b.txt (minio-go)", err)
	_, err = as.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("team"), Key: aws.String("bob/b.txt")})
	denied("alice", "GetObject bob/b.txt (aws-sdk-go-v2)", err)
	_, err = getBody(am, "team", "alicex.txt")
	denied("alice", "GET alicex.txt (the prefix is alice/, not alice)", err)
	_, err = as.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("team"), Key: aws.String("bob/x"), Body: strings.NewReader("x")})
	denied("alice", "PutObject bob/x", err)
	_, err = am.PutObject(ctx(t), "team", "shared/x", strings.NewReader("x"), 1, minio.PutObjectOptions{})
	denied("alice", "PUT shared/x (read only there)", err)
	for _, prefix := range []string{"", "alice", "bob/"} {
		_, err = sdkList(as, prefix)
		denied("alice", "ListObjectsV2 prefix "+prefix+" (aws-sdk-go-v2)", err)
		_, err = minioList(am, prefix)
		denied("alice", "ListObjects prefix "+prefix+" (minio-go)", err)
	}
	_, err = as.ListObjectVersions(ctx(t), &s3.ListObjectVersionsInput{Bucket: aws.String("team")})
	denied("alice", "ListObjectVersions of the whole bucket", err)
	_, err = as.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("team"), Key: aws.String("alice/stolen.txt"), CopySource: aws.String("team/bob/b.txt")})
	denied("alice", "CopyObject from bob/ into alice/", err)
	_, err = as.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("team"), Policy: aws.String(`{"Version":"2012-10-17","Statement":[]}`)})
	denied("alice", "PutBucketPolicy", err)
	del, err := as.DeleteObjects(ctx(t), &s3.DeleteObjectsInput{Bucket: aws.String("team"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("alice/new.txt")}, {Key: aws.String("bob/b.txt")}}}})
	if err != nil || len(del.Deleted) != 1 || aws.ToString(del.Deleted[0].Key) != "alice/new.txt" ||
		len(del.Errors) != 1 || aws.ToString(del.Errors[0].Key) != "bob/b.txt" || aws.ToString(del.Errors[0].Code) != "AccessDenied" {
		t.Errorf("alice DeleteObjects across her prefix: %v %+v", err, del)
	}
	for _, k := range []string{"bob/b.txt", "alicex.txt", "shared/s.txt"} {
		if _, err := admin.StatObject(ctx(t), "team", k, minio.StatObjectOptions{}); err != nil {
			t.Errorf("%s after alice's refused calls: %v", k, err)
		}
	}
	for _, k := range []string{"bob/x", "shared/x", "alice/stolen.txt", "alice/new.txt"} {
		if _, err := admin.StatObject(ctx(t), "team", k, minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
			t.Errorf("%s: %v, want NoSuchKey", k, err)
		}
	}

	// A policy naming keys: carol, without any right, may read and list
	// shared/; alice may not delete in her prefix.
	carol := createKey(t, d, "--name", "carol")
	cs := sdkClientAt(d.info.Endpoint, carol)
	cm := s3Client(t, d.info.Endpoint, carol.AccessKey, carol.SecretKey)
	_, err = cs.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("team"), Key: aws.String("shared/s.txt")})
	denied("carol", "GetObject before the policy", err)
	putPolicy := func(doc string) error {
		_, err := adminSDK.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("team"), Policy: aws.String(doc)})
		return err
	}
	policy := `{"Version":"2012-10-17","Statement":[
	  {"Sid":"CarolReadsShared","Effect":"Allow","Principal":{"AWS":["arn:aws:iam::000000000000:user/` + carol.AccessKey + `"]},
	   "Action":"s3:GetObject","Resource":"arn:aws:s3:::team/shared/*"},
	  {"Sid":"CarolListsShared","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:user/` + carol.AccessKey + `"},
	   "Action":"s3:ListBucket","Resource":"arn:aws:s3:::team","Condition":{"StringLike":{"s3:prefix":"shared/*"}}},
	  {"Sid":"AliceKeeps","Effect":"Deny","Principal":{"AWS":"` + alice.AccessKey + `"},
	   "Action":"s3:DeleteObject","Resource":"arn:aws:s3:::team/alice/*"}]}`
	if err := putPolicy(policy); err != nil {
		t.Fatalf("PutBucketPolicy naming keys: %v", err)
	}
	if out, err := cs.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("team"), Key: aws.String("shared/s.txt")}); err != nil {
		t.Errorf("carol GetObject shared/s.txt under the policy (aws-sdk-go-v2): %v", err)
	} else {
		out.Body.Close()
	}
	if got, err := getBody(cm, "team", "shared/s.txt"); err != nil || string(got) != "content of shared/s.txt" {
		t.Errorf("carol GET shared/s.txt under the policy (minio-go): %q %v", got, err)
	}
	if keys, err := sdkList(cs, "shared/"); err != nil || !slices.Equal(keys, []string{"shared/s.txt"}) {
		t.Errorf("carol ListObjectsV2 shared/: %q %v", keys, err)
	}
	_, err = sdkList(cs, "")
	denied("carol", "ListObjectsV2 of the whole bucket", err)
	_, err = cs.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("team"), Key: aws.String("bob/b.txt")})
	denied("carol", "GetObject outside the policy's resource", err)
	_, err = cs.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("team"), Key: aws.String("shared/c"), Body: strings.NewReader("c")})
	denied("carol", "PutObject (the policy allows reads only)", err)
	if code, body := anonymous(t, d, "GET", "/team/shared/s.txt", nil); code != 403 || !strings.Contains(body, "AccessDenied") {
		t.Errorf("anonymous GET of what the policy gives carol: %d %.200s", code, body)
	}
	st, err := adminSDK.GetBucketPolicyStatus(ctx(t), &s3.GetBucketPolicyStatusInput{Bucket: aws.String("team")})
	if err != nil || aws.ToBool(st.PolicyStatus.IsPublic) {
		t.Errorf("policy status of a policy naming keys only: %v %+v, want not public", err, st)
	}
	_, err = as.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("team"), Key: aws.String("alice/a.txt")})
	denied("alice", "DeleteObject under a Deny naming her key", err)
	if _, err := as.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("team"), Key: aws.String("alice/b.txt"), Body: strings.NewReader("b")}); err != nil {
		t.Errorf("alice PutObject, which the Deny does not cover: %v", err)
	}
	if _, err := admin.StatObject(ctx(t), "team", "alice/a.txt", minio.StatObjectOptions{}); err != nil {
		t.Errorf("alice/a.txt after the denied delete: %v", err)
	}
	// A principal that names no key is refused, the stored policy stays.
	for _, p := range []string{`"RKNOSUCHKEY000000000"`, `"arn:aws:iam::000000000000:user/carol"`, `"arn:aws:iam::000000000000:root"`} {
		doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":` + p + `},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team/*"}]}`
		if err := putPolicy(doc); apiCode(err) != "MalformedPolicy" {
			t.Errorf("PutBucketPolicy naming %s: %v, want MalformedPolicy", p, err)
		}
	}
	if got, err := adminSDK.GetBucketPolicy(ctx(t), &s3.GetBucketPolicyInput{Bucket: aws.String("team")}); err != nil || aws.ToString(got.Policy) != policy {
		t.Errorf("the policy after refused ones: %v", err)
	}

	// Revoking her prefix right: refused at once through this gateway;
	// her other prefix keeps working.
	if out := cli("key", "revoke", "alice", "--bucket", "team", "--prefix", "alice/"); strings.Contains(out, "team/alice/") || !strings.Contains(out, "team/shared/:read") {
		t.Errorf("key revoke --prefix printed %q", out)
	}
	_, err = getBody(am, "team", "alice/a.txt")
	denied("alice", "GET alice/a.txt once her prefix right is revoked", err)
	if _, err := getBody(am, "team", "shared/s.txt"); err != nil {
		t.Errorf("alice GET shared/s.txt after the other prefix's revoke: %v", err)
	}
	if out := cli("key", "list"); !strings.Contains(out, "team/shared/:read") || strings.Contains(out, "team/alice/") {
		t.Errorf("key list:\n%s", out)
	}
}
