package tests

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/sigv4"
)

// randomData returns n reproducible pseudo-random bytes.
func randomData(n int64, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func mustMakeBucket(t testing.TB, c *minio.Client, name string) {
	t.Helper()
	err := c.MakeBucket(ctx(t), name, minio.MakeBucketOptions{})
	// NB: on a loaded machine the client may retry a create whose first
	// try succeeded after the client gave up on it; the retry then finds
	// the bucket ours. Every test uses fresh bucket names, so that answer
	// can only come from such a retry.
	if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		t.Fatalf("make bucket %s: %v", name, err)
	}
}

func put(t testing.TB, c *minio.Client, bucket, key string, data []byte, opts minio.PutObjectOptions) minio.UploadInfo {
	t.Helper()
	info, err := c.PutObject(ctx(t), bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		t.Fatalf("put %s/%s (%d bytes): %v", bucket, key, len(data), err)
	}
	return info
}

func get(t testing.TB, c *minio.Client, bucket, key string, opts minio.GetObjectOptions) []byte {
	t.Helper()
	obj, err := c.GetObject(ctx(t), bucket, key, opts)
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	return b
}

const stripeBytes = 6 << 20 // rs-6-3 with 1 MiB chunks

func TestRoundTripSizes(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := d.client(t)
	mustMakeBucket(t, c, "sizes")
	sizes := []int64{0, 1, 128<<10 - 1, 128 << 10, 128<<10 + 1, stripeBytes - 1, stripeBytes, stripeBytes + 1, 100 << 20}
	for i, size := range sizes {
		data := randomData(size, uint64(i))
		key := fmt.Sprintf("obj-%d", size)
		info := put(t, c, "sizes", key, data, minio.PutObjectOptions{
			ContentType:  "application/x-test",
			UserMetadata: map[string]string{"origin": "e2e", "size": fmt.Sprint(size)},
			// Force a single PUT: multipart is a later feature.
			DisableMultipart: true,
		})
		sum := md5.Sum(data)
		if info.ETag != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: ETag %s, want MD5 %x", key, info.ETag, sum)
		}
		got := get(t, c, "sizes", key, minio.GetObjectOptions{})
		if sha(got) != sha(data) {
			t.Fatalf("%s: read back %d bytes that differ from the %d written", key, len(got), size)
		}
		st, err := c.StatObject(ctx(t), "sizes", key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Size != size || st.ContentType != "application/x-test" || st.UserMetadata["Origin"] != "e2e" {
			t.Errorf("%s: stat = size %d type %q meta %v", key, st.Size, st.ContentType, st.UserMetadata)
		}
		if size > 10 {
			for _, r := range [][2]int64{{0, 0}, {1, size / 3}, {size / 2, size - 1}, {size - 1, size - 1}} {
				opts := minio.GetObjectOptions{}
				opts.SetRange(r[0], r[1])
				if got := get(t, c, "sizes", key, opts); !bytes.Equal(got, data[r[0]:r[1]+1]) {
					t.Fatalf("%s: range %d-%d: wrong bytes", key, r[0], r[1])
				}
			}
		}
	}
	// A range starting past the end is 416 InvalidRange.
	opts := minio.GetObjectOptions{}
	opts.SetRange(1000, 2000)
	obj, _ := c.GetObject(ctx(t), "sizes", "obj-1", opts)
	if _, err := io.ReadAll(obj); minio.ToErrorResponse(err).Code != "InvalidRange" {
		t.Errorf("range past the end: want InvalidRange, got %v", err)
	}
	// Missing keys and buckets.
	if _, err := c.StatObject(ctx(t), "sizes", "nope", minio.StatObjectOptions{}); minio.ToErrorResponse(err).StatusCode != 404 {
		t.Errorf("stat of a missing key: want 404, got %v", err)
	}
	obj, _ = c.GetObject(ctx(t), "nobucket", "x", minio.GetObjectOptions{})
	if _, err := io.ReadAll(obj); minio.ToErrorResponse(err).Code != "NoSuchBucket" {
		t.Errorf("get from a missing bucket: want NoSuchBucket, got %v", err)
	}
	// Overwrite, then delete.
	put(t, c, "sizes", "obj-1", []byte("new"), minio.PutObjectOptions{})
	if got := get(t, c, "sizes", "obj-1", minio.GetObjectOptions{}); string(got) != "new" {
		t.Fatalf("after overwrite read %q", got)
	}
	if err := c.RemoveObject(ctx(t), "sizes", "obj-1", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatObject(ctx(t), "sizes", "obj-1", minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Errorf("stat after delete: want NoSuchKey, got %v", err)
	}
}

func TestBucketsAndListing(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := d.client(t)
	// minio-go refuses bad names itself, so send the request by hand.
	for _, bad := range []string{"Bad_Name", "ab", "-lead", "a..b", "192.168.1.1"} {
		code, body := rawRequest(t, d, "PUT", "/"+bad)
		if code != 400 || !strings.Contains(body, "<Code>InvalidBucketName</Code>") {
			t.Errorf("bucket %q: want 400 InvalidBucketName, got %d %s", bad, code, body)
		}
	}
	mustMakeBucket(t, c, "list")
	if err := c.MakeBucket(ctx(t), "list", minio.MakeBucketOptions{}); minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		t.Errorf("second create: want BucketAlreadyOwnedByYou, got %v", err)
	}
	keys := []string{"a.txt", "dir/x", "dir/y", "dir/sub/z", "dir2/w", "z z+%/../é"}
	for i := range 30 {
		keys = append(keys, fmt.Sprintf("many/%03d", i))
	}
	for _, k := range keys {
		put(t, c, "list", k, []byte(k), minio.PutObjectOptions{})
	}
	list := func(opts minio.ListObjectsOptions) (objs, prefixes []string) {
		t.Helper()
		for o := range c.ListObjects(ctx(t), "list", opts) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			if strings.HasSuffix(o.Key, "/") && o.Size == 0 && o.ETag == "" {
				prefixes = append(prefixes, o.Key)
			} else {
				objs = append(objs, o.Key)
			}
		}
		return
	}
	all, _ := list(minio.ListObjectsOptions{Recursive: true})
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Errorf("recursive list:\n got %q\nwant %q", all, want)
	}
	objs, prefixes := list(minio.ListObjectsOptions{})
	if !slices.Equal(objs, []string{"a.txt"}) || !slices.Equal(prefixes, []string{"dir/", "dir2/", "many/", "z z+%/"}) {
		t.Errorf("delimited list: objects %q prefixes %q", objs, prefixes)
	}
	objs, prefixes = list(minio.ListObjectsOptions{Prefix: "dir/"})
	if !slices.Equal(objs, []string{"dir/x", "dir/y"}) || !slices.Equal(prefixes, []string{"dir/sub/"}) {
		t.Errorf("list dir/: objects %q prefixes %q", objs, prefixes)
	}
	// Small pages force continuation tokens.
	paged, _ := list(minio.ListObjectsOptions{Prefix: "many/", Recursive: true, MaxKeys: 7})
	if len(paged) != 30 || paged[0] != "many/000" || paged[29] != "many/029" {
		t.Errorf("paged list returned %d keys: %q", len(paged), paged)
	}
	after, _ := list(minio.ListObjectsOptions{Prefix: "many/", Recursive: true, StartAfter: "many/025"})
	if !slices.Equal(after, []string{"many/026", "many/027", "many/028", "many/029"}) {
		t.Errorf("start-after: %q", after)
	}
	// Buckets: listed, not deletable while not empty.
	bs, err := c.ListBuckets(ctx(t))
	if err != nil || len(bs) != 1 || bs[0].Name != "list" || bs[0].CreationDate.IsZero() {
		t.Errorf("list buckets: %v %v", bs, err)
	}
	if err := c.RemoveBucket(ctx(t), "list"); minio.ToErrorResponse(err).Code != "BucketNotEmpty" {
		t.Errorf("delete non-empty bucket: want BucketNotEmpty, got %v", err)
	}
	for _, k := range keys {
		if err := c.RemoveObject(ctx(t), "list", k, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if all, _ := list(minio.ListObjectsOptions{Recursive: true}); len(all) != 0 {
		t.Errorf("deleted keys still listed: %q", all)
	}
	if err := c.RemoveBucket(ctx(t), "list"); err != nil {
		t.Fatalf("delete empty bucket: %v", err)
	}
	if ok, err := c.BucketExists(ctx(t), "list"); ok || err != nil {
		t.Errorf("bucket exists after delete: %v %v", ok, err)
	}
}

func TestWrongCredentials(t *testing.T) {
	parallel(t)
	d := startDev(t)
	bad := s3Client(t, d.info.Endpoint, d.info.AccessKey, "wrong-secret")
	if _, err := bad.ListBuckets(ctx(t)); minio.ToErrorResponse(err).Code != "SignatureDoesNotMatch" || minio.ToErrorResponse(err).StatusCode != 403 {
		t.Errorf("wrong secret: want 403 SignatureDoesNotMatch, got %v", err)
	}
	unknown := s3Client(t, d.info.Endpoint, "nobody", "whatever")
	if _, err := unknown.ListBuckets(ctx(t)); minio.ToErrorResponse(err).Code != "InvalidAccessKeyId" || minio.ToErrorResponse(err).StatusCode != 403 {
		t.Errorf("unknown key: want 403 InvalidAccessKeyId, got %v", err)
	}
}

// startGateway starts a second gateway that joins the dev cluster, with
// extra flags (such as --clock-offset) if given.
func startGateway(t testing.TB, d *devCluster, extra ...string) string {
	t.Helper()
	addr, gossip := freeAddr(t), freeAddr(t)
	args := []string{"gateway", "--addr", addr, "--gossip", gossip, "--join", d.info.Gateways[0].Gossip,
		"--gossip-profile", "local", "--storage-class", "STANDARD_IA=clay-6-3"}
	cmd := exec.Command(regenBin, append(args, extra...)...)
	cmd.Env = append(os.Environ(), "REGEN_CLUSTER_SECRET="+d.info.Secret, "REGEN_ACCESS_KEY="+d.info.AccessKey, "REGEN_SECRET_KEY="+d.info.SecretKey)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	c := s3Client(t, "http://"+addr, d.info.AccessKey, d.info.SecretKey)
	waitFor(t, 30*time.Second, "second gateway to see the shard servers", func() bool {
		_, err := c.ListBuckets(ctx(t))
		return err == nil
	})
	return "http://" + addr
}

func TestTwoGatewaysAgree(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c1 := d.client(t)
	c2 := s3Client(t, startGateway(t, d), d.info.AccessKey, d.info.SecretKey)
	mustMakeBucket(t, c1, "shared")
	waitFor(t, 10*time.Second, "bucket visible through gateway 2", func() bool {
		ok, _ := c2.BucketExists(ctx(t), "shared")
		return ok
	})
	data := randomData(9<<20, 7)
	put(t, c1, "shared", "big", data, minio.PutObjectOptions{DisableMultipart: true})
	if got := get(t, c2, "shared", "big", minio.GetObjectOptions{}); sha(got) != sha(data) {
		t.Fatal("gateway 2 read different bytes than gateway 1 wrote")
	}
	// Concurrent PUTs of one key through both gateways: afterwards both
	// gateways serve the same one of the two, whole.
	for round := range 5 {
		a := randomData(7<<20, uint64(100+round))
		b := randomData(7<<20, uint64(200+round))
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			put(t, c1, "shared", "race", a, minio.PutObjectOptions{DisableMultipart: true})
		}()
		go func() {
			defer wg.Done()
			put(t, c2, "shared", "race", b, minio.PutObjectOptions{DisableMultipart: true})
		}()
		wg.Wait()
		g1 := sha(get(t, c1, "shared", "race", minio.GetObjectOptions{}))
		g2 := sha(get(t, c2, "shared", "race", minio.GetObjectOptions{}))
		if g1 != g2 {
			t.Fatalf("round %d: the gateways disagree on the winner", round)
		}
		if g1 != sha(a) && g1 != sha(b) {
			t.Fatalf("round %d: the object is neither write: shards were mixed", round)
		}
	}
}

func TestSurvivesThreeDeadShards(t *testing.T) {
	d := startDev(t)
	c := d.client(t)
	mustMakeBucket(t, c, "durable")
	objects := map[string][]byte{}
	for i, size := range []int64{10, 200 << 10, stripeBytes + 5, 20 << 20} {
		key := fmt.Sprintf("o%d", i)
		objects[key] = randomData(size, uint64(i+50))
		put(t, c, "durable", key, objects[key], minio.PutObjectOptions{DisableMultipart: true})
	}
	for _, i := range []int{2, 5, 9} {
		d.killShard(i)
	}
	// Reads work immediately (dead servers refuse connections) and after
	// gossip has declared them dead.
	for _, phase := range []string{"right after the kill", "after failure detection"} {
		if phase != "right after the kill" {
			waitFor(t, 30*time.Second, "gossip to declare the 3 killed servers dead", func() bool { return d.deadShards(t) == 3 })
		}
		for key, data := range objects {
			if got := get(t, c, "durable", key, minio.GetObjectOptions{}); sha(got) != sha(data) {
				t.Fatalf("%s: %s differs after 3 of 12 shard servers were killed", phase, key)
			}
		}
	}
	objs := 0
	for o := range c.ListObjects(ctx(t), "durable", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		objs++
	}
	if objs != len(objects) {
		t.Errorf("listing with 3 dead servers shows %d of %d objects", objs, len(objects))
	}
}

func TestPutFailsWithOnlyKServers(t *testing.T) {
	d := startDev(t)
	c := d.client(t)
	mustMakeBucket(t, c, "quorum")
	put(t, c, "quorum", "before", []byte("exists"), minio.PutObjectOptions{})
	for i := range 6 { // 12 - 6 = 6 = k live servers, one short of k+1
		d.killShard(i)
	}
	tryPut := func(phase string) {
		for _, size := range []int64{100, 3 << 20} {
			key := fmt.Sprintf("half-%d", size)
			_, err := c.PutObject(ctx(t), "quorum", key, bytes.NewReader(randomData(size, 1)), size, minio.PutObjectOptions{DisableMultipart: true})
			resp := minio.ToErrorResponse(err)
			if err == nil || (resp.StatusCode != 503 && resp.StatusCode != 500) {
				t.Fatalf("%s: PUT of %d bytes with k live servers: want 503/500, got %v", phase, size, err)
			}
		}
	}
	tryPut("right after the kill")
	waitFor(t, 30*time.Second, "gossip to declare 6 servers dead", func() bool {
		return d.deadShards(t) == 6
	})
	tryPut("after failure detection")
	// A failed write is indeterminate, as in S3: it may or may not have
	// taken effect (a manifest that reached k servers stays, see
	// docs/CONSISTENCY.md). What must never happen is a torn or wrong
	// object. With 6 of 12 servers dead, more than the code tolerates, a
	// lookup may also be unable to prove the key absent: 503, not 404.
	absent := map[string]bool{}
	for _, key := range []string{"half-100", "half-3145728"} {
		_, err := c.StatObject(ctx(t), "quorum", key, minio.StatObjectOptions{})
		switch code := minio.ToErrorResponse(err).StatusCode; {
		case err == nil:
			size, _ := strconv.ParseInt(strings.TrimPrefix(key, "half-"), 10, 64)
			if got := get(t, c, "quorum", key, minio.GetObjectOptions{}); sha(got) != sha(randomData(size, 1)) {
				t.Errorf("failed PUT of %s reads back torn", key)
			}
		case code == 404:
			absent[key] = true
		case code == 503:
		default:
			t.Errorf("HEAD of failed PUT %s: want 404/503 or the whole object, got %v", key, err)
		}
	}
	// (The object written before may itself have lost more than n-k
	// servers now, so only the failed keys are checked.)
	for o := range c.ListObjects(ctx(t), "quorum", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			if minio.ToErrorResponse(o.Err).StatusCode == 503 {
				break
			}
			t.Fatal(o.Err)
		}
		if absent[o.Key] {
			t.Errorf("failed PUT of %s is listed but HEAD proved it absent", o.Key)
		}
	}
}

func TestCorruptShardIsDetected(t *testing.T) {
	parallel(t)
	d := startDev(t)
	c := d.client(t)
	mustMakeBucket(t, c, "rot")
	data := randomData(8<<20, 99)
	put(t, c, "rot", "victim", data, minio.PutObjectOptions{DisableMultipart: true})
	// Flip a byte in the first data block of shard 0 and shard 1 wherever
	// they are: the object has exactly one shard file with each index.
	corrupted := flipShardByte(t, d, 1000, ".0", ".1")
	// Exactly two unless a loaded machine made gossip flap and the repair
	// worker copied shards meanwhile; corrupting those copies too is fine.
	if corrupted < 2 {
		t.Fatalf("corrupted %d shard files, want at least 2", corrupted)
	}
	if got := get(t, c, "rot", "victim", minio.GetObjectOptions{}); sha(got) != sha(data) {
		t.Fatal("object read wrong bytes with two corrupt shards")
	}
	opts := minio.GetObjectOptions{}
	opts.SetRange(500, 1500)
	if got := get(t, c, "rot", "victim", opts); !bytes.Equal(got, data[500:1501]) {
		t.Fatal("ranged read over the corrupt block returned wrong bytes")
	}

	// A block past the first of shard 2: the shard server sends it as
	// stored (framed, with sendfile), and the gateway finds it bad.
	mid := flipShardByte(t, d, 250_000, ".2") // in the fourth 64 KiB block
	if mid < 1 {
		t.Fatal("found no shard 2 file to corrupt past its first block")
	}
	before := d.gatewayCounter(t, "regen_corrupt_shard_reads_total")
	if got := get(t, c, "rot", "victim", minio.GetObjectOptions{}); sha(got) != sha(data) {
		t.Fatal("object read wrong bytes with a block of shard 2 corrupt past its first")
	}
	if after := d.gatewayCounter(t, "regen_corrupt_shard_reads_total"); after <= before {
		t.Fatalf("regen_corrupt_shard_reads_total %v -> %v, want it counted", before, after)
	}
}

// flipShardByte flips the byte at off of every shard file, on every shard
// server, whose name ends in one of suffixes (a shard index) and that is
// longer than off, and returns how many it flipped.
func flipShardByte(t *testing.T, d *devCluster, off int64, suffixes ...string) int {
	t.Helper()
	flipped := 0
	for _, s := range d.info.Shards {
		filepath.Walk(filepath.Join(s.Data, "shards"), func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() || fi.Size() <= off || !slices.ContainsFunc(suffixes, func(x string) bool { return strings.HasSuffix(p, x) }) {
				return nil
			}
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 1)
			f.ReadAt(b, off)
			b[0] ^= 0xff
			f.WriteAt(b, off)
			flipped++
			return nil
		})
	}
	return flipped
}

func TestRestartServesSameObjects(t *testing.T) {
	dir := t.TempDir()
	d := startDevIn(t, dir)
	c := d.client(t)
	mustMakeBucket(t, c, "persist")
	data := randomData(7<<20, 3)
	put(t, c, "persist", "k", data, minio.PutObjectOptions{DisableMultipart: true})
	d.stop()
	d2 := startDevIn(t, dir)
	if got := get(t, d2.client(t), "persist", "k", minio.GetObjectOptions{}); sha(got) != sha(data) {
		t.Fatal("after restart the object differs")
	}
}

// rawRequest sends a signed request that an SDK would refuse to send.
func rawRequest(t testing.TB, d *devCluster, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, d.info.Endpoint+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	sigv4.Sign(req, d.info.AccessKey, d.info.SecretKey, "us-east-1", time.Now(), "UNSIGNED-PAYLOAD")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
