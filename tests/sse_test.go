package tests

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/encrypt"
	"github.com/minio/minio-go/v7/pkg/sse"
)

// TestSSE covers encryption at rest on one dev cluster: SSE-S3 and SSE-C
// through minio-go (PUT, GET, HEAD, ranges across 64 KiB packages,
// multipart, copies between encryptions, UploadPartCopy, bucket default
// encryption, a wrong or missing SSE-C key refused), the aws CLI when it
// is installed, no plaintext of an encrypted object in any file of the
// cluster while an unencrypted control's is found, and, last, reads with
// three shard servers killed: degraded reads of ciphertext, which need no
// key on the shard side. Not parallel: it kills servers.
func TestSSE(t *testing.T) {
	d := startDev(t)
	c := d.client(t)
	core := &minio.Core{Client: c}
	mustMakeBucket(t, c, "sse")
	key1, key2 := bytes.Repeat([]byte("k"), 32), bytes.Repeat([]byte("K"), 32)
	ssec1, err := encrypt.NewSSEC(key1)
	if err != nil {
		t.Fatal(err)
	}
	ssec2, _ := encrypt.NewSSEC(key2)
	s3 := encrypt.NewSSE()

	objects := map[string][]byte{ // encrypted: never in a file in clear
		"s3obj": randomData(700<<10, 101),
		"cobj":  randomData(700<<10, 102),
		"mp":    randomData(11<<20, 103),
		"tiny":  randomData(1<<10, 104),
	}
	control, controlTiny := randomData(300<<10, 105), randomData(1<<10, 106)
	put(t, c, "sse", "s3obj", objects["s3obj"], minio.PutObjectOptions{ServerSideEncryption: s3, DisableMultipart: true})
	put(t, c, "sse", "cobj", objects["cobj"], minio.PutObjectOptions{ServerSideEncryption: ssec1, DisableMultipart: true})
	put(t, c, "sse", "mp", objects["mp"], minio.PutObjectOptions{ServerSideEncryption: ssec1, PartSize: 5 << 20})
	put(t, c, "sse", "tiny", objects["tiny"], minio.PutObjectOptions{ServerSideEncryption: s3})
	put(t, c, "sse", "control", control, minio.PutObjectOptions{DisableMultipart: true})
	put(t, c, "sse", "control-tiny", controlTiny, minio.PutObjectOptions{})
	getC1 := minio.GetObjectOptions{ServerSideEncryption: ssec1}

	t.Run("GetHeadRange", func(t *testing.T) {
		data := objects["s3obj"]
		info, err := c.StatObject(ctx(t), "sse", "s3obj", minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum(data)
		if info.Size != int64(len(data)) || info.ETag != hex.EncodeToString(sum[:]) || info.Metadata.Get("X-Amz-Server-Side-Encryption") != "AES256" {
			t.Errorf("HEAD of SSE-S3 object: size %d etag %s sse %q; want %d, the plaintext MD5 %x, AES256",
				info.Size, info.ETag, info.Metadata.Get("X-Amz-Server-Side-Encryption"), len(data), sum)
		}
		if got := get(t, c, "sse", "s3obj", minio.GetObjectOptions{}); !bytes.Equal(got, data) {
			t.Error("SSE-S3 GET: wrong bytes")
		}
		for _, r := range [][2]int64{{0, 1}, {65535, 2}, {65536, 65536}, {65535, 65538}, {100000, 300000}, {int64(len(data)) - 1, 1}} {
			var opts minio.GetObjectOptions
			opts.SetRange(r[0], r[0]+r[1]-1)
			if got := get(t, c, "sse", "s3obj", opts); !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
				t.Errorf("SSE-S3 GET bytes %d+%d: wrong bytes", r[0], r[1])
			}
		}
		cdata := objects["cobj"]
		info, err = c.StatObject(ctx(t), "sse", "cobj", minio.StatObjectOptions{ServerSideEncryption: ssec1})
		if err != nil {
			t.Fatal(err)
		}
		csum := md5.Sum(cdata)
		if info.Size != int64(len(cdata)) || info.ETag == hex.EncodeToString(csum[:]) || info.Metadata.Get("X-Amz-Server-Side-Encryption-Customer-Algorithm") != "AES256" {
			t.Errorf("HEAD of SSE-C object: size %d etag %s; want %d, not the plaintext MD5, and the SSE-C algorithm", info.Size, info.ETag, len(cdata))
		}
		if got := get(t, c, "sse", "cobj", getC1); !bytes.Equal(got, cdata) {
			t.Error("SSE-C GET: wrong bytes")
		}
		mp := objects["mp"]
		opts := getC1
		opts.SetRange(5<<20-10, 5<<20+9) // across the first part boundary
		if got := get(t, c, "sse", "mp", opts); !bytes.Equal(got, mp[5<<20-10:5<<20+10]) {
			t.Error("SSE-C multipart GET across parts: wrong bytes")
		}
		if got := get(t, c, "sse", "mp", getC1); !bytes.Equal(got, mp) {
			t.Error("SSE-C multipart GET: wrong bytes")
		}
		if got := get(t, c, "sse", "tiny", minio.GetObjectOptions{}); !bytes.Equal(got, objects["tiny"]) {
			t.Error("small SSE-S3 object: wrong bytes")
		}
	})

	t.Run("WrongKeyRefused", func(t *testing.T) {
		_, err := c.StatObject(ctx(t), "sse", "cobj", minio.StatObjectOptions{ServerSideEncryption: ssec2})
		if code := minio.ToErrorResponse(err).StatusCode; code != http.StatusForbidden {
			t.Errorf("HEAD with the wrong SSE-C key: %v (%d), want 403", err, code)
		}
		obj, err := c.GetObject(ctx(t), "sse", "mp", minio.GetObjectOptions{ServerSideEncryption: ssec2})
		if err == nil {
			_, err = obj.Read(make([]byte, 1))
			obj.Close()
		}
		if r := minio.ToErrorResponse(err); r.StatusCode != http.StatusForbidden || r.Code != "AccessDenied" {
			t.Errorf("GET with the wrong SSE-C key: %v, want 403 AccessDenied", err)
		}
		_, err = c.StatObject(ctx(t), "sse", "cobj", minio.StatObjectOptions{})
		if code := minio.ToErrorResponse(err).StatusCode; code != http.StatusBadRequest {
			t.Errorf("HEAD of an SSE-C object without its key: %v (%d), want 400", err, code)
		}
		// A part of an SSE-C upload must come with the upload's key.
		id, err := core.NewMultipartUpload(ctx(t), "sse", "wrong-part", minio.PutObjectOptions{ServerSideEncryption: ssec1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = core.PutObjectPart(ctx(t), "sse", "wrong-part", id, 1, bytes.NewReader([]byte("part")), 4, minio.PutObjectPartOptions{SSE: ssec2})
		if code := minio.ToErrorResponse(err).StatusCode; code != http.StatusForbidden {
			t.Errorf("UploadPart with another SSE-C key than the upload's: %v (%d), want 403", err, code)
		}
		core.AbortMultipartUpload(ctx(t), "sse", "wrong-part", id)
	})

	t.Run("Copies", func(t *testing.T) {
		// SSE-C source to SSE-S3, SSE-S3 source to SSE-C under another key.
		_, err := c.CopyObject(ctx(t), minio.CopyDestOptions{Bucket: "sse", Object: "c-to-s3", Encryption: s3},
			minio.CopySrcOptions{Bucket: "sse", Object: "cobj", Encryption: ssec1})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, c, "sse", "c-to-s3", minio.GetObjectOptions{}); !bytes.Equal(got, objects["cobj"]) {
			t.Error("SSE-C copied to SSE-S3: wrong bytes")
		}
		_, err = c.CopyObject(ctx(t), minio.CopyDestOptions{Bucket: "sse", Object: "s3-to-c", Encryption: ssec2},
			minio.CopySrcOptions{Bucket: "sse", Object: "s3obj"})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, c, "sse", "s3-to-c", minio.GetObjectOptions{ServerSideEncryption: ssec2}); !bytes.Equal(got, objects["s3obj"]) {
			t.Error("SSE-S3 copied to SSE-C: wrong bytes")
		}
		// Without the source's key the copy is refused.
		_, err = c.CopyObject(ctx(t), minio.CopyDestOptions{Bucket: "sse", Object: "nokey"}, minio.CopySrcOptions{Bucket: "sse", Object: "cobj"})
		if code := minio.ToErrorResponse(err).StatusCode; code != http.StatusBadRequest {
			t.Errorf("copy of an SSE-C object without its key: %v, want 400", err)
		}
		// UploadPartCopy from the SSE-C object into an SSE-S3 upload.
		id, err := core.NewMultipartUpload(ctx(t), "sse", "upc", minio.PutObjectOptions{ServerSideEncryption: s3})
		if err != nil {
			t.Fatal(err)
		}
		hdr := map[string]string{}
		h := http.Header{}
		encrypt.SSECopy(ssec1).Marshal(h)
		for k := range h {
			hdr[k] = h.Get(k)
		}
		part, err := core.CopyObjectPart(ctx(t), "sse", "cobj", "sse", "upc", id, 1, 1000, 200000, hdr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := core.CompleteMultipartUpload(ctx(t), "sse", "upc", id, []minio.CompletePart{part}, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, c, "sse", "upc", minio.GetObjectOptions{}); !bytes.Equal(got, objects["cobj"][1000:201000]) {
			t.Error("UploadPartCopy of an SSE-C range into an SSE-S3 upload: wrong bytes")
		}
	})

	t.Run("BucketDefault", func(t *testing.T) {
		mustMakeBucket(t, c, "sse-default")
		if err := c.SetBucketEncryption(ctx(t), "sse-default", sse.NewConfigurationSSES3()); err != nil {
			t.Fatal(err)
		}
		cfg, err := c.GetBucketEncryption(ctx(t), "sse-default")
		if err != nil || len(cfg.Rules) != 1 || cfg.Rules[0].Apply.SSEAlgorithm != "AES256" {
			t.Fatalf("GetBucketEncryption: %+v, %v", cfg, err)
		}
		data := randomData(200<<10, 107)
		objects["default"] = data
		put(t, c, "sse-default", "default", data, minio.PutObjectOptions{})
		info, err := c.StatObject(ctx(t), "sse-default", "default", minio.StatObjectOptions{})
		if err != nil || info.Metadata.Get("X-Amz-Server-Side-Encryption") != "AES256" {
			t.Fatalf("a PUT without SSE headers into a bucket with default encryption: %v, %v", info.Metadata, err)
		}
		if err := c.RemoveBucketEncryption(ctx(t), "sse-default"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetBucketEncryption(ctx(t), "sse-default"); minio.ToErrorResponse(err).Code != "ServerSideEncryptionConfigurationNotFoundError" {
			t.Errorf("GetBucketEncryption after delete: %v", err)
		}
	})

	t.Run("AwsCLI", func(t *testing.T) {
		aws, err := exec.LookPath("aws")
		if err != nil {
			t.Skip("no aws CLI")
		}
		dir := t.TempDir()
		data := randomData(300<<10, 108)
		objects["cli-c"], objects["cli-s3"] = data, data
		keyFile := filepath.Join(dir, "key")
		os.WriteFile(filepath.Join(dir, "in"), data, 0o600)
		os.WriteFile(keyFile, key2, 0o600)
		run := func(args ...string) {
			t.Helper()
			cmd := exec.Command(aws, append([]string{"--endpoint-url", d.info.Endpoint, "--region", "us-east-1"}, args...)...)
			cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+d.info.AccessKey, "AWS_SECRET_ACCESS_KEY="+d.info.SecretKey,
				"AWS_CONFIG_FILE="+filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"), "AWS_EC2_METADATA_DISABLED=true")
			out, err := cmd.CombinedOutput()
			t.Logf("aws %s\n%s", strings.Join(args, " "), out)
			if err != nil {
				t.Fatalf("aws %v: %v", args, err)
			}
		}
		in, cKey := filepath.Join(dir, "in"), "fileb://"+keyFile
		run("s3", "cp", "--no-progress", in, "s3://sse/cli-s3", "--sse", "AES256")
		run("s3", "cp", "--no-progress", in, "s3://sse/cli-c", "--sse-c", "AES256", "--sse-c-key", cKey)
		run("s3", "cp", "--no-progress", "s3://sse/cli-s3", filepath.Join(dir, "out-s3"))
		run("s3", "cp", "--no-progress", "s3://sse/cli-c", filepath.Join(dir, "out-c"), "--sse-c", "AES256", "--sse-c-key", cKey)
		for _, name := range []string{"out-s3", "out-c"} {
			if got, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(got, data) {
				t.Errorf("aws s3 cp back to %s: wrong bytes", name)
			}
		}
	})

	t.Run("NoPlaintextOnDisk", func(t *testing.T) {
		// 64-byte samples of every encrypted object; the unencrypted
		// controls (one striped, one inline) show the search finds data.
		secrets := map[string][]byte{}
		for name, data := range objects {
			for _, off := range []int{0, len(data) / 2, len(data) - 64} {
				secrets[fmt.Sprintf("%s at %d", name, off)] = data[off : off+64]
			}
		}
		found := map[string]bool{}
		filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			for what, s := range secrets {
				if bytes.Contains(b, s) {
					t.Errorf("plaintext of encrypted object %s found in %s", what, path)
				}
			}
			for name, s := range map[string][]byte{"control": control[:64], "control-tiny": controlTiny[:64]} {
				if bytes.Contains(b, s) {
					found[name] = true
				}
			}
			return nil
		})
		if !found["control"] || !found["control-tiny"] {
			t.Errorf("the unencrypted controls' bytes were not found on disk (%v): the search is blind", found)
		}
	})

	t.Run("DegradedRead", func(t *testing.T) {
		// Any three of twelve: every rs-6-3 object keeps six shards.
		for i := range 3 {
			d.killShard(i)
		}
		waitFor(t, 60*time.Second, "the gateway to see three servers dead", func() bool { return d.deadShards(t) == 3 })
		if got := get(t, c, "sse", "s3obj", minio.GetObjectOptions{}); !bytes.Equal(got, objects["s3obj"]) {
			t.Error("degraded SSE-S3 GET: wrong bytes")
		}
		if got := get(t, c, "sse", "mp", getC1); !bytes.Equal(got, objects["mp"]) {
			t.Error("degraded SSE-C multipart GET: wrong bytes")
		}
		opts := getC1
		opts.SetRange(65530, 65545)
		if got := get(t, c, "sse", "cobj", opts); !bytes.Equal(got, objects["cobj"][65530:65546]) {
			t.Error("degraded SSE-C range GET: wrong bytes")
		}
	})
}
