package compose

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/encrypt"
)

// cluster is the running compose project, as run.sh describes it.
type cluster struct {
	project   string
	compose   []string // e.g. docker compose -p P -f docker-compose.yml
	endpoints [2]string
	access    string
	secret    string
	regen     string // the regen binary, for `regen admin`
}

func fromEnv(t *testing.T) cluster {
	c := cluster{
		project:   os.Getenv("REGEN_COMPOSE_PROJECT"),
		compose:   strings.Fields(os.Getenv("REGEN_COMPOSE_CMD")),
		endpoints: [2]string{os.Getenv("REGEN_COMPOSE_ENDPOINT1"), os.Getenv("REGEN_COMPOSE_ENDPOINT2")},
		access:    os.Getenv("REGEN_ACCESS_KEY"),
		secret:    os.Getenv("REGEN_SECRET_KEY"),
		regen:     os.Getenv("REGEN_BIN"),
	}
	if c.project == "" || len(c.compose) == 0 || c.endpoints[0] == "" || c.endpoints[1] == "" || c.regen == "" {
		t.Skip("no compose cluster: run tests/compose/run.sh")
	}
	return c
}

func (c cluster) s3(t *testing.T, i int) *minio.Client {
	t.Helper()
	cl, err := minio.New(strings.TrimPrefix(c.endpoints[i], "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(c.access, c.secret, ""), Region: "us-east-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// kill stops services the hard way (SIGKILL), as a crash would.
func (c cluster) kill(t *testing.T, services ...string) {
	t.Helper()
	args := append(append(append([]string{}, c.compose[1:]...), "kill"), services...)
	out, err := exec.Command(c.compose[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("compose kill %v: %v\n%s", services, err, out)
	}
}

// status is `regen admin status --json` through gateway i, as a generic
// map so the test can look for fields that newer gateways add.
func (c cluster) status(t *testing.T, i int) map[string]any {
	t.Helper()
	out, err := exec.Command(c.regen, "admin", "status", "--json", "--endpoint", c.endpoints[i],
		"--access-key", c.access, "--secret-key", c.secret).Output()
	if err != nil {
		t.Fatalf("regen admin status: %v", err)
	}
	var st map[string]any
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("regen admin status --json: %v\n%s", err, out)
	}
	return st
}

func countNodes(st map[string]any, role, state string) int {
	nodes, _ := st["nodes"].([]any)
	n := 0
	for _, v := range nodes {
		m, _ := v.(map[string]any)
		if m["r"] == role && m["state"] == state {
			n++
		}
	}
	return n
}

// degraded returns status.stripes.degraded and whether the gateway
// reports it at all (it does once the repair worker exists).
func degraded(st map[string]any) (float64, bool) {
	stripes, ok := st["stripes"].(map[string]any)
	if !ok {
		return 0, false
	}
	d, ok := stripes["degraded"].(float64)
	return d, ok
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(time.Second)
	}
}

type object struct {
	key, class string
	sse        bool // written with SSE-S3
	data       []byte
}

func TestComposeCluster(t *testing.T) {
	c := fromEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	up, down := c.s3(t, 0), c.s3(t, 1)

	waitFor(t, 60*time.Second, "both gateways to see 12 live shard servers", func() bool {
		return countNodes(c.status(t, 0), "shard", "alive") == 12 && countNodes(c.status(t, 1), "shard", "alive") == 12
	})

	const bucket = "compose"
	if err := up.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	// Inline, one partial stripe, several stripes; both storage classes
	// (STANDARD = rs-6-3, STANDARD_IA = clay-6-3 in docker-compose.yml).
	var objs []object
	for _, class := range []string{"STANDARD", "STANDARD_IA"} {
		for _, size := range []int{1000, 300 << 10, 13<<20 + 17} {
			b := make([]byte, size)
			rand.Read(b)
			objs = append(objs, object{key: fmt.Sprintf("%s/%d", strings.ToLower(class), size), class: class, data: b})
		}
	}
	// SSE-S3 needs the key file both gateways mount: written through
	// one, read through the other.
	for _, size := range []int{1000, 3<<20 + 5} {
		b := make([]byte, size)
		rand.Read(b)
		objs = append(objs, object{key: fmt.Sprintf("sse-s3/%d", size), class: "STANDARD", sse: true, data: b})
	}
	for _, o := range objs {
		opts := minio.PutObjectOptions{StorageClass: o.class, DisableMultipart: true}
		if o.sse {
			opts.ServerSideEncryption = encrypt.NewSSE()
		}
		_, err := up.PutObject(ctx, bucket, o.key, bytes.NewReader(o.data), int64(len(o.data)), opts)
		if err != nil {
			t.Fatalf("put %s through gateway1: %v", o.key, err)
		}
	}
	verify := func(cl *minio.Client, via string) {
		t.Helper()
		for _, o := range objs {
			r, err := cl.GetObject(ctx, bucket, o.key, minio.GetObjectOptions{})
			if err != nil {
				t.Fatalf("get %s through %s: %v", o.key, via, err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatalf("read %s through %s: %v", o.key, via, err)
			}
			if !bytes.Equal(got, o.data) {
				t.Fatalf("%s through %s: %d bytes differ from the %d written", o.key, via, len(got), len(o.data))
			}
		}
	}
	verify(down, "gateway2")
	t.Logf("%d objects written through gateway1 read back byte-exact through gateway2", len(objs))

	c.kill(t, "shard4", "shard9")
	waitFor(t, 90*time.Second, "both gateways to see 2 dead shard servers", func() bool {
		return countNodes(c.status(t, 0), "shard", "dead") == 2 && countNodes(c.status(t, 1), "shard", "dead") == 2
	})
	verify(down, "gateway2 with shard4 and shard9 dead")
	verify(up, "gateway1 with shard4 and shard9 dead")
	t.Logf("every object byte-exact through both gateways with two shard servers dead")

	// A gateway whose shard API reports repair status has
	// stripes.degraded, and the cluster must heal itself to zero; without
	// it there is nothing to wait for.
	if _, ok := degraded(c.status(t, 0)); !ok {
		t.Log("the gateway reports no repair status (no stripes.degraded in admin status): skipping the degraded=0 wait")
		return
	}
	start := time.Now()
	waitFor(t, 5*time.Minute, "admin status to report no degraded stripes", func() bool {
		d, _ := degraded(c.status(t, 0))
		return d == 0
	})
	t.Logf("repaired: admin status reports no degraded stripes %s after the check began", time.Since(start).Round(time.Second))
	verify(down, "gateway2 after repair")
	verify(up, "gateway1 after repair")
}
