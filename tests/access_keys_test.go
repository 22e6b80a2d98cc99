package tests

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/gateway"
)

// regenAdmin runs `regen admin ARGS` against the dev cluster's gateway
// with the given key pair, and returns its output and error.
func regenAdmin(t *testing.T, endpoint, access, secret string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(regenBin, append([]string{"admin"}, args...)...)
	cmd.Env = append(cleanEnv(), "REGEN_ENDPOINT="+endpoint, "REGEN_ACCESS_KEY="+access, "REGEN_SECRET_KEY="+secret)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// keyPair is what `regen admin key create --json` prints.
type keyPair struct {
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
	Name      string `json:"name"`
}

func createKey(t *testing.T, d *devCluster, args ...string) keyPair {
	t.Helper()
	out, err := regenAdmin(t, d.info.Endpoint, d.info.AccessKey, d.info.SecretKey, append([]string{"key", "create", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("regen admin key create %v: %v\n%s", args, err, out)
	}
	var k keyPair
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.AccessKey == "" || len(k.SecretKey) < 40 {
		t.Fatalf("regen admin key create %v printed %q (%v)", args, out, err)
	}
	return k
}

func sdkClientAt(endpoint string, k keyPair) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(k.AccessKey, k.SecretKey, ""),
		UsePathStyle: true,
	})
}

// TestAccessKeys: stored access keys with rights per bucket, as an
// operator and their users meet them. The admin makes alice with read on
// one bucket: she reads (minio-go and aws-sdk-go-v2), through a second
// gateway too, but cannot write, configure the bucket, see other buckets
// or use the operator API. A key allowed to create buckets owns what it
// creates. Revoking a right and deleting a key take effect on both
// gateways within seconds (the caches' TTL is 2 s).
func TestAccessKeys(t *testing.T) {
	d := startDev(t)
	admin := d.client(t)
	mustMakeBucket(t, admin, "shared")
	mustMakeBucket(t, admin, "secret")
	put(t, admin, "shared", "doc.txt", []byte("for alice"), minio.PutObjectOptions{})
	put(t, admin, "secret", "plans.txt", []byte("not for alice"), minio.PutObjectOptions{})
	gw2 := startGateway(t, d)

	alice := createKey(t, d, "--name", "alice")
	if out, err := regenAdmin(t, d.info.Endpoint, d.info.AccessKey, d.info.SecretKey, "key", "grant", "alice", "--bucket", "shared", "--right", "read"); err != nil || !strings.Contains(out, "shared:read") {
		t.Fatalf("key grant: %v\n%s", err, out)
	}
	am := s3Client(t, d.info.Endpoint, alice.AccessKey, alice.SecretKey)
	am2 := s3Client(t, gw2, alice.AccessKey, alice.SecretKey)
	as := sdkClientAt(d.info.Endpoint, alice)

	// Reading: allowed on shared, through both gateways and both SDKs.
	// NB: a gateway that read the bucket's record less than keyRetry
	// before the grant (gateway 2, on a fast machine) sees the right once
	// its cache expires: "within seconds", like a revoke, not at once.
	for name, c := range map[string]*minio.Client{"gateway 1": am, "gateway 2": am2} {
		var got []byte
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if got, err = getBody(c, "shared", "doc.txt"); (err == nil && string(got) == "for alice") || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || string(got) != "for alice" {
			t.Errorf("alice GET shared/doc.txt through %s: %q %v", name, got, err)
		}
	}
	out, err := as.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("shared"), Key: aws.String("doc.txt")})
	if err != nil {
		t.Errorf("alice GetObject (aws-sdk-go-v2): %v", err)
	} else {
		out.Body.Close()
	}
	if l, err := as.ListObjectsV2(ctx(t), &s3.ListObjectsV2Input{Bucket: aws.String("shared")}); err != nil || len(l.Contents) != 1 {
		t.Errorf("alice ListObjectsV2 shared: %v", err)
	}
	bs, err := am.ListBuckets(ctx(t))
	if err != nil || len(bs) != 1 || bs[0].Name != "shared" {
		t.Errorf("alice ListBuckets: %+v %v; want shared only", bs, err)
	}

	// Everything else: 403 AccessDenied.
	denied := func(what string, err error) {
		t.Helper()
		if apiCode(err) != "AccessDenied" && minio.ToErrorResponse(err).Code != "AccessDenied" {
			t.Errorf("alice %s: %v, want AccessDenied", what, err)
		}
	}
	_, err = as.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("shared"), Key: aws.String("new.txt"), Body: strings.NewReader("x")})
	denied("PutObject (aws-sdk-go-v2)", err)
	_, err = am.PutObject(ctx(t), "shared", "new.txt", strings.NewReader("x"), 1, minio.PutObjectOptions{})
	denied("PutObject (minio-go)", err)
	if minio.ToErrorResponse(err).StatusCode != 403 {
		t.Errorf("alice PutObject: status %d, want 403", minio.ToErrorResponse(err).StatusCode)
	}
	_, err = as.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("shared"), Key: aws.String("doc.txt")})
	denied("DeleteObject", err)
	_, err = as.CreateMultipartUpload(ctx(t), &s3.CreateMultipartUploadInput{Bucket: aws.String("shared"), Key: aws.String("mp")})
	denied("CreateMultipartUpload", err)
	_, err = as.GetObject(ctx(t), &s3.GetObjectInput{Bucket: aws.String("secret"), Key: aws.String("plans.txt")})
	denied("GetObject of a bucket without rights", err)
	_, err = as.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("shared"), Policy: aws.String(`{"Version":"2012-10-17","Statement":[]}`)})
	denied("PutBucketPolicy", err)
	_, err = as.DeleteBucket(ctx(t), &s3.DeleteBucketInput{Bucket: aws.String("shared")})
	denied("DeleteBucket", err)
	_, err = as.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("alices")})
	denied("CreateBucket without create-buckets", err)
	_, err = as.CopyObject(ctx(t), &s3.CopyObjectInput{Bucket: aws.String("shared"), Key: aws.String("c"), CopySource: aws.String("shared/doc.txt")})
	denied("CopyObject into a read-only bucket", err)
	if _, err := admin.StatObject(ctx(t), "shared", "new.txt", minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Errorf("a refused PUT stored something: %v", err)
	}
	for _, args := range [][]string{{"drain", d.info.Shards[0].ID, "--no-wait"}, {"status"}, {"key", "list"}, {"key", "create", "--name", "mallory", "--admin"}} {
		out, err := regenAdmin(t, d.info.Endpoint, alice.AccessKey, alice.SecretKey, args...)
		if err == nil || !strings.Contains(out, "AccessDenied") {
			t.Errorf("alice: regen admin %v: %v %q, want AccessDenied", args, err, out)
		}
	}
	if out, err := regenAdmin(t, d.info.Endpoint, alice.AccessKey, alice.SecretKey, "bucket", "set-code", "shared", "rs-4-2"); err == nil || !strings.Contains(out, "AccessDenied") {
		t.Errorf("alice: regen admin bucket set-code on a bucket she does not own: %v %q", err, out)
	}

	// A key that may create buckets owns them: it configures them, and
	// the admin sees its rights in the key list.
	bob := createKey(t, d, "--name", "bob", "--create-buckets")
	bc := sdkClientAt(gw2, bob) // created through gateway 1, used through gateway 2 at once
	if _, err := bc.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("bobs")}); err != nil {
		t.Fatalf("bob CreateBucket: %v", err)
	}
	if _, err := bc.PutBucketPolicy(ctx(t), &s3.PutBucketPolicyInput{Bucket: aws.String("bobs"), Policy: aws.String(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::bobs/*"}]}`)}); err != nil {
		t.Errorf("bob PutBucketPolicy on his bucket: %v", err)
	}
	if _, err := bc.PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String("bobs"), Key: aws.String("k"), Body: strings.NewReader("bob's")}); err != nil {
		t.Errorf("bob PutObject: %v", err)
	}
	_, err = bc.DeleteObject(ctx(t), &s3.DeleteObjectInput{Bucket: aws.String("bobs"), Key: aws.String("k")})
	if apiCode(err) != "AccessDenied" {
		t.Errorf("bob DeleteObject under his own policy's Deny: %v, want AccessDenied (a Deny wins over rights)", err)
	}
	if _, err := bc.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: aws.String("secret")}); apiCode(err) != "BucketAlreadyExists" {
		t.Errorf("bob CreateBucket of the admin's bucket: %v, want BucketAlreadyExists", err)
	}
	if out, err := regenAdmin(t, gw2, bob.AccessKey, bob.SecretKey, "bucket", "set-code", "bobs", "rs-4-2"); err != nil {
		t.Errorf("bob: regen admin bucket set-code on his own bucket: %v\n%s", err, out)
	}
	if out, err := regenAdmin(t, d.info.Endpoint, d.info.AccessKey, d.info.SecretKey, "key", "list"); err != nil ||
		!strings.Contains(out, "bobs:read,write,owner") || !strings.Contains(out, "shared:read") || strings.Contains(out, alice.SecretKey) {
		t.Errorf("key list: %v\n%s", err, out)
	}

	// Revoking alice's read: within seconds, both gateways refuse her.
	if out, err := regenAdmin(t, d.info.Endpoint, d.info.AccessKey, d.info.SecretKey, "key", "revoke", "alice", "--bucket", "shared"); err != nil {
		t.Fatalf("key revoke: %v\n%s", err, out)
	}
	revoked := time.Now()
	refused := func(c *minio.Client, code string) func() bool {
		return func() bool {
			_, err := getBody(c, "shared", "doc.txt")
			return minio.ToErrorResponse(err).Code == code
		}
	}
	if !refused(am, "AccessDenied")() {
		t.Error("the gateway that revoked alice's right still lets her read")
	}
	waitFor(t, 10*time.Second, "gateway 2 to refuse alice once her right is revoked", refused(am2, "AccessDenied"))
	t.Logf("revoked right refused by gateway 2 after %v", time.Since(revoked).Round(time.Millisecond))

	// Deleting her key: InvalidAccessKeyId on both gateways.
	if out, err := regenAdmin(t, gw2, d.info.AccessKey, d.info.SecretKey, "key", "delete", alice.AccessKey); err != nil {
		t.Fatalf("key delete: %v\n%s", err, out)
	}
	deleted := time.Now()
	waitFor(t, 10*time.Second, "gateway 1 to refuse alice's deleted key", func() bool {
		_, err := am.ListBuckets(ctx(t))
		return minio.ToErrorResponse(err).Code == "InvalidAccessKeyId"
	})
	t.Logf("deleted key refused by gateway 1 after %v", time.Since(deleted).Round(time.Millisecond))
	if _, err := am2.ListBuckets(ctx(t)); minio.ToErrorResponse(err).Code != "InvalidAccessKeyId" || minio.ToErrorResponse(err).StatusCode != 403 {
		t.Errorf("gateway 2, alice's deleted key: %v, want 403 InvalidAccessKeyId", err)
	}
	// The bootstrap admin is untouched by all of it.
	if got, err := getBody(admin, "secret", "plans.txt"); err != nil || string(got) != "not for alice" {
		t.Errorf("admin GET: %q %v", got, err)
	}
}

// TestKeyRacesThroughTwoGateways: `regen admin key` operations racing
// through two gateways, several rounds. A key's deletion and a flag
// change (grant admin) at once: whichever lands first, the key ends
// deleted (the flag change never writes it back), and neither gateway
// accepts it once their caches expire. Two creations of one name at once:
// exactly one succeeds, and the name exists once. Each operation holds
// the key's (or the name's) lease from its read to its write
// (docs/CONSISTENCY.md, "Access-key records"); the second gateway's
// operation starts up to 15 ms after the first's, so the rounds try
// several overlaps.
func TestKeyRacesThroughTwoGateways(t *testing.T) {
	parallel(t)
	d := startDev(t)
	gws := []string{d.info.Endpoint, startGateway(t, d)}
	admin := func(gw string, args ...string) (string, error) {
		return regenAdmin(t, gw, d.info.AccessKey, d.info.SecretKey, args...)
	}
	// race runs a through gateway i and b through the other, b delay
	// later, and returns their outputs and errors.
	race := func(i int, delay time.Duration, a, b []string) (outs [2]string, errs [2]error) {
		var wg sync.WaitGroup
		wg.Go(func() { outs[0], errs[0] = admin(gws[i], a...) })
		wg.Go(func() {
			time.Sleep(delay)
			outs[1], errs[1] = admin(gws[1-i], b...)
		})
		wg.Wait()
		return outs, errs
	}
	listed := func(gw string) []gateway.KeyInfo {
		t.Helper()
		out, err := admin(gw, "key", "list", "--json")
		if err != nil {
			t.Fatalf("key list: %v\n%s", err, out)
		}
		var keys []gateway.KeyInfo
		if err := json.Unmarshal([]byte(out), &keys); err != nil {
			t.Fatalf("key list printed %q: %v", out, err)
		}
		return keys
	}
	const rounds = 8
	var deleted []keyPair
	grantsFirst := 0
	for r := range rounds {
		i, delay := r%2, time.Duration(r%4)*5*time.Millisecond

		k := createKey(t, d, "--name", fmt.Sprintf("doomed-%d", r))
		outs, errs := race(i, delay, []string{"key", "delete", k.AccessKey}, []string{"key", "grant", k.AccessKey, "--right", "admin"})
		if errs[0] != nil {
			t.Fatalf("round %d: key delete: %v\n%s", r, errs[0], outs[0])
		}
		if errs[1] != nil && !strings.Contains(outs[1], "no access key") {
			t.Errorf("round %d: key grant admin: %v\n%s; want success or \"no access key\"", r, errs[1], outs[1])
		}
		deleted = append(deleted, k)
		if errs[1] == nil {
			grantsFirst++
		}
		for g, gw := range gws {
			for _, l := range listed(gw) {
				if l.AccessKey == k.AccessKey {
					t.Errorf("round %d: the deleted key %s is listed by gateway %d: %+v (grant: %v)", r, k.AccessKey, g+1, l, errs[1])
				}
			}
		}

		name := fmt.Sprintf("twin-%d", r)
		create := []string{"key", "create", "--name", name, "--json"}
		outs, errs = race(i, delay, create, create)
		if ok := (errs[0] == nil) != (errs[1] == nil); !ok {
			t.Errorf("round %d: two creations of %s: %v, %v; want exactly one to succeed\n%s\n%s", r, name, errs[0], errs[1], outs[0], outs[1])
		}
		for j := range 2 {
			if errs[j] != nil && !strings.Contains(outs[j], "exists already") {
				t.Errorf("round %d: creation of %s refused with %v\n%s; want \"exists already\"", r, name, errs[j], outs[j])
			}
		}
		n := 0
		for _, l := range listed(gws[1-i]) {
			if l.Name == name {
				n++
			}
		}
		if n != 1 {
			t.Errorf("round %d: %d keys named %s, want 1", r, n, name)
		}
	}

	t.Logf("%d of %d flag changes landed before the deletion, the others found the key deleted", grantsFirst, rounds)

	// The deleted keys sign nothing, through either gateway, once the
	// caches (2 s) expire.
	for g, gw := range gws {
		for _, k := range deleted {
			c := s3Client(t, gw, k.AccessKey, k.SecretKey)
			waitFor(t, 10*time.Second, fmt.Sprintf("gateway %d to refuse the deleted key %s", g+1, k.AccessKey), func() bool {
				_, err := c.ListBuckets(ctx(t))
				return minio.ToErrorResponse(err).Code == "InvalidAccessKeyId"
			})
		}
	}
}
