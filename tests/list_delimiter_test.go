package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// listCalls sums the listing calls the live shard servers answered (their
// request metrics).
func (d *devCluster) listCalls(t *testing.T, dead map[int]bool) int {
	t.Helper()
	sum := 0
	for i, s := range d.info.Shards {
		if dead[i] {
			continue
		}
		resp, err := http.Get("http://" + s.Addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "regen_shardserver_request_duration_seconds_count{") && strings.Contains(line, `route="list"`) {
				f := strings.Fields(line)
				v, err := strconv.ParseFloat(f[len(f)-1], 64)
				if err != nil {
					t.Fatalf("metrics line %q: %v", line, err)
				}
				sum += int(v)
			}
		}
	}
	return sum
}

// listNames lists bucket with delimiter "/" (one page) and returns its
// common prefixes and keys, sorted together.
func listNames(t *testing.T, c *minio.Client, bucket string) []string {
	t.Helper()
	var out []string
	for o := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{}) {
		if o.Err != nil {
			t.Fatalf("list %s: %v", bucket, o.Err)
		}
		out = append(out, o.Key)
	}
	slices.Sort(out)
	return out
}

// A delimiter listing of folders asks 7 of the 12 shard servers
// (known-k+1 with rs-6-3) and lists every folder, also with two servers
// killed; folders beside keys change the calls, not the answer; a folder
// whose keys were all deleted goes (its tombstones name it unsure until
// confirmed, which sends the page to every server).
func TestDelimiterListing(t *testing.T) {
	d := startDev(t)
	c := d.client(t)
	ctx := context.Background()
	for _, b := range []string{"folders", "mixed"} {
		if err := c.MakeBucket(ctx, b, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var folders, mixed []string
	for f := range 10 {
		for k := range 3 {
			for _, b := range []string{"folders", "mixed"} {
				if _, err := c.PutObject(ctx, b, fmt.Sprintf("f%02d/k%d", f, k), strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		folders = append(folders, fmt.Sprintf("f%02d/", f))
		mixed = append(mixed, fmt.Sprintf("f%02d/", f))
	}
	for k := range 3 {
		key := fmt.Sprintf("top-%d", k)
		if _, err := c.PutObject(ctx, "mixed", key, strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		mixed = append(mixed, key)
	}
	slices.Sort(mixed)

	before := d.listCalls(t, nil)
	if got := listNames(t, c, "folders"); !slices.Equal(got, folders) {
		t.Fatalf("folders: listed %v, want %v", got, folders)
	}
	if calls := d.listCalls(t, nil) - before; calls != 7 {
		t.Errorf("a page of folders cost %d listing calls, want 7 (of 12 servers)", calls)
	}
	before = d.listCalls(t, nil)
	if got := listNames(t, c, "mixed"); !slices.Equal(got, mixed) {
		t.Fatalf("mixed: listed %v, want %v", got, mixed)
	}
	if calls := d.listCalls(t, nil) - before; calls != 12 {
		t.Errorf("a page with keys cost %d listing calls, want 12 (7, then the other 5)", calls)
	}

	// Two servers killed: the listings stay whole, whether or not the
	// gateway has noticed yet.
	d.killShard(0)
	d.killShard(1)
	for _, wait := range []bool{false, true} {
		if wait {
			waitFor(t, 60*time.Second, "two shard servers dead", func() bool { return d.deadShards(t) == 2 })
		}
		if got := listNames(t, c, "folders"); !slices.Equal(got, folders) {
			t.Fatalf("folders, two servers down (noticed %v): listed %v, want %v", wait, got, folders)
		}
		if got := listNames(t, c, "mixed"); !slices.Equal(got, mixed) {
			t.Fatalf("mixed, two servers down (noticed %v): listed %v, want %v", wait, got, mixed)
		}
	}
	dead := map[int]bool{0: true, 1: true}
	before = d.listCalls(t, dead)
	listNames(t, c, "folders")
	if calls := d.listCalls(t, dead) - before; calls != 7 {
		t.Errorf("with two of 12 servers dead, a page of folders cost %d listing calls, want 7", calls)
	}

	// Delete folder f03 in both buckets, two servers still down: it goes
	// from both listings at once (acknowledged deletes; the tombstones are
	// unconfirmed for a while and name it unsure, which sends the page to
	// every live server).
	for _, b := range []string{"folders", "mixed"} {
		for k := range 3 {
			if err := c.RemoveObject(ctx, b, fmt.Sprintf("f03/k%d", k), minio.RemoveObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	folders = slices.DeleteFunc(folders, func(s string) bool { return s == "f03/" })
	mixed = slices.DeleteFunc(mixed, func(s string) bool { return s == "f03/" })
	if got := listNames(t, c, "folders"); !slices.Equal(got, folders) {
		t.Fatalf("folders after deleting f03/: listed %v, want %v", got, folders)
	}
	if got := listNames(t, c, "mixed"); !slices.Equal(got, mixed) {
		t.Fatalf("mixed after deleting f03/: listed %v, want %v", got, mixed)
	}
}
