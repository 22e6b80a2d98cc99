package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/regen-s3/regen/internal/placement"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// The five ways issue 16 found the metadata path breaking its guarantees,
// each replayed as a user would: real processes (regen dev, a second
// gateway), kill -9 and restart, and an S3 client. Each test is one case;
// its comment says what the right answer is.

// cons holds what the consistency tests share over one dev cluster.
type cons struct {
	d   *devCluster
	c   *minio.Client // through regen dev's gateway, one attempt per request
	rpc *shardrpc.Client
	idx map[string]int // node ID -> index in d.info.Shards
}

func newCons(t *testing.T, d *devCluster) *cons {
	k := &cons{d: d, c: noRetryClient(t, d.info.Endpoint, d), rpc: shardrpc.New(d.info.Secret, nil), idx: map[string]int{}}
	for i, s := range d.info.Shards {
		k.idx[s.ID] = i
	}
	return k
}

// noRetryClient is an S3 client that sends each request once: a 503 is
// what these tests look for, and minio-go would otherwise retry it for
// seconds.
func noRetryClient(t testing.TB, endpoint string, d *devCluster) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds:      credentials.NewStaticV4(d.info.AccessKey, d.info.SecretKey, ""),
		Region:     "us-east-1",
		MaxRetries: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// order is the key's rendezvous order over every shard server of the
// cluster: with as many servers as the code's n, a PUT places a shard on
// each of them, dead ones included (the gateway's placeNew).
func (k *cons) order(bucket, key string) []string {
	ids := make([]string, 0, len(k.d.info.Shards))
	for _, s := range k.d.info.Shards {
		ids = append(ids, s.ID)
	}
	return placement.Order(bucket+"/"+key, ids)
}

func (k *cons) addr(id string) string { return k.d.info.Shards[k.idx[id]].Addr }

// versions asks server id for its versions of bucket/key; cur is nil when
// it has none.
func (k *cons) versions(t testing.TB, id, bucket, key string) (cur *metadata.Manifest, prev []*metadata.Manifest, err error) {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cur, prev, err = k.rpc.GetManifestVersions(c, k.addr(id), bucket, key)
	if errors.Is(err, shardrpc.ErrNotFound) {
		return nil, nil, nil
	}
	return cur, prev, err
}

// waitStates waits until the gateway sees every server of alive alive and
// every server of dead dead.
func (k *cons) waitStates(t testing.TB, timeout time.Duration, alive, dead []string) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("the gateway to see %v alive and %v dead", alive, dead), func() bool {
		st := k.d.status(t)
		for _, id := range alive {
			if nodeOf(st, id).State != "alive" {
				return false
			}
		}
		for _, id := range dead {
			if nodeOf(st, id).State != "dead" {
				return false
			}
		}
		return true
	})
}

// httpStatus is the HTTP status of an S3 call's outcome (200 for none).
func httpStatus(err error) int {
	if err == nil {
		return 200
	}
	if s := minio.ToErrorResponse(err).StatusCode; s != 0 {
		return s
	}
	return -1 // no answer at all
}

// getBody GETs bucket/key and returns its bytes or the error.
func getBody(c *minio.Client, bucket, key string) ([]byte, error) {
	cx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	obj, err := c.GetObject(cx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj)
}

// whole reports, for each (bucket, key), whether every server of the
// newest manifest's placement holds that manifest as current and its
// shard of every part with the manifest's CRC: full redundancy.
func (k *cons) whole(objs [][2]string) error {
	for _, o := range objs {
		var m *metadata.Manifest
		for _, s := range k.d.info.Shards {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cur, err := k.rpc.GetManifest(c, s.Addr, o[0], o[1])
			cancel()
			if err == nil && (m == nil || m.Version.Less(cur.Version)) {
				m = cur
			}
		}
		if m == nil {
			return fmt.Errorf("%s/%s: no server holds a manifest", o[0], o[1])
		}
		for i, id := range m.Placement {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cur, err := k.rpc.GetManifest(c, k.addr(id), o[0], o[1])
			cancel()
			if err != nil || cur.Version != m.Version {
				return fmt.Errorf("%s/%s: server %d (%s) lacks manifest %s (%v)", o[0], o[1], k.idx[id], id, m.Version, err)
			}
			for _, p := range m.Parts {
				c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				info, err := k.rpc.StatShard(c, k.addr(id), p.ID, i)
				cancel()
				if err != nil || info.CRC != p.ShardCRC[i] {
					return fmt.Errorf("%s/%s: server %d (%s) lacks shard %d of part %s (%v)", o[0], o[1], k.idx[id], id, i, p.ID, err)
				}
			}
		}
	}
	return nil
}

// Case 2: an acknowledged version is never rolled back on a server that
// returns after the repair grace. Three servers of two keys' placements
// die right after both keys were overwritten (their confirm jobs for the
// overwrite still pending, --gc-delay). Meanwhile one key is repaired
// onto other servers (a repair switch, a new placement) and the other is
// overwritten on a new placement and deleted (a tombstone there). The
// survivors confirm those and drop the overwrite from their versions.
// When the three return, only they still hold the acknowledged overwrite;
// the newer versions live mostly on other servers. They must not roll it
// back (restoring the version it replaced), and they must learn the newer
// versions; clients read the repaired object and the delete.
func TestConsistencyCase2NoRollbackAfterMove(t *testing.T) {
	e2e(t)
	d := startDev(t, "--repair-grace", "3s", "--gc-delay", "15s", "--rollback-after", "4s")
	k := newCons(t, d)
	const bucket = "case2"
	mustMakeBucket(t, k.c, bucket)
	const switched, moved = "switched", "moved"
	ps, pm := k.order(bucket, switched)[:9], k.order(bucket, moved)[:9]
	var down []string
	for _, id := range ps {
		if slices.Contains(pm, id) && len(down) < 3 {
			down = append(down, id)
		}
	}
	args := map[string][]string{}
	for _, id := range down {
		args[id] = d.shardArgs(k.idx[id])
	}
	v1 := map[string][]byte{}
	acked := map[string]metadata.Version{}
	for i, key := range []string{switched, moved} {
		put(t, k.c, bucket, key, randomData(300<<10+5, uint64(20+i)), minio.PutObjectOptions{DisableMultipart: true})
		v1[key] = randomData(400<<10+9, uint64(30+i))
		put(t, k.c, bucket, key, v1[key], minio.PutObjectOptions{DisableMultipart: true})
		cur, prev, err := k.versions(t, down[0], bucket, key)
		if err != nil || cur == nil || len(prev) == 0 {
			t.Fatalf("%s on server %s: %v, %d previous (err %v); the overwrite's confirm job must still be pending", key, down[0], cur, len(prev), err)
		}
		acked[key] = cur.Version
	}
	for _, id := range down {
		d.killShard(k.idx[id])
	}
	var up []string
	for _, s := range d.info.Shards {
		if !slices.Contains(down, s.ID) {
			up = append(up, s.ID)
		}
	}
	k.waitStates(t, 30*time.Second, up, down)

	// The overwritten-and-deleted key: a new placement (the live servers'
	// order), then a tombstone on it.
	put(t, k.c, bucket, moved, randomData(200<<10+1, 40), minio.PutObjectOptions{DisableMultipart: true})
	if err := k.c.RemoveObject(ctx(t), bucket, moved, minio.RemoveObjectOptions{}); err != nil {
		t.Fatalf("DELETE %s: %v", moved, err)
	}
	// The repaired key: rebuilt onto servers outside its placement.
	newest := func(key string) *metadata.Manifest {
		var best *metadata.Manifest
		for _, id := range up {
			if cur, _, err := k.versions(t, id, bucket, key); err == nil && cur != nil && (best == nil || best.Version.Less(cur.Version)) {
				best = cur
			}
		}
		return best
	}
	waitFor(t, 90*time.Second, "the repair switch of "+switched, func() bool {
		m := newest(switched)
		return m != nil && strings.HasPrefix(m.Version.Writer, "repair-") && !slices.ContainsFunc(down, func(id string) bool { return slices.Contains(m.Placement, id) })
	})
	// The survivors confirm the newer versions and drop the overwrite.
	waitFor(t, 90*time.Second, "the live servers to drop the overwritten versions", func() bool {
		for _, id := range up {
			for _, key := range []string{switched, moved} {
				cur, prev, err := k.versions(t, id, bucket, key)
				if err != nil {
					return false
				}
				for _, m := range append(prev, cur) {
					if m != nil && m.Version == acked[key] {
						return false
					}
				}
			}
		}
		return true
	})
	final := map[string]*metadata.Manifest{switched: newest(switched), moved: newest(moved)}
	t.Logf("%s switched to %s on %v; %s deleted at %s on %v", switched, final[switched].Version, final[switched].Placement, moved, final[moved].Version, final[moved].Placement)

	for _, id := range down {
		d.restartShard(k.idx[id], args[id])
	}
	k.waitStates(t, 30*time.Second, append(slices.Clone(up), down...), nil)
	// Each returned server's confirm job for the overwrite runs now (its
	// age is past --rollback-after). Until it has learnt the newer
	// version, it must keep the acknowledged one: never anything older.
	waitFor(t, 60*time.Second, "the returned servers to hold the newer versions", func() bool {
		done := true
		for _, id := range down {
			for _, key := range []string{switched, moved} {
				cur, _, err := k.versions(t, id, bucket, key)
				if err != nil {
					done = false
					continue
				}
				if cur == nil {
					t.Fatalf("server %s lost every version of %s (acknowledged %s)", id, key, acked[key])
				}
				if cur.Version.Less(acked[key]) {
					t.Fatalf("server %s rolled %s back from acknowledged %s to %s", id, key, acked[key], cur.Version)
				}
				done = done && cur.Version == final[key].Version
			}
		}
		return done
	})
	for _, id := range down {
		b, err := os.ReadFile(filepath.Join(d.info.Shards[k.idx[id]].Data, "shard.log"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "rolled back unconfirmed manifest") {
			t.Errorf("server %s logged a rollback:\n%s", id, grepLines(string(b), "rolled back"))
		}
	}
	if got, err := getBody(k.c, bucket, switched); err != nil || !bytes.Equal(got, v1[switched]) {
		t.Errorf("GET %s after the return: %v (%d bytes), want the acknowledged overwrite", switched, err, len(got))
	}
	if _, err := k.c.StatObject(ctx(t), bucket, moved, minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Errorf("HEAD of deleted %s after the return: %v, want NoSuchKey", moved, err)
	}
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Case 5a: a write acknowledged while one server was down (placed on it:
// with as many servers as the code's n, and also right after the kill,
// before gossip noticed) gets all n shards and manifests back soon after
// the server returns: within 10 s of the gateway seeing it alive, not at
// the next periodic sync (pushed out to 10 minutes here), repair scan
// (30 s, the production default: a return noticed by a scan starts a full
// manifest sync) or repair grace.
func TestConsistencyCase5HealOnReturn(t *testing.T) {
	e2e(t)
	d := startDev(t, "--shards", "9", "--repair-grace", "10m", "--sync-interval", "10m", "--repair-scan", "30s")
	k := newCons(t, d)
	const bucket = "case5"
	mustMakeBucket(t, k.c, bucket)
	x := d.info.Shards[4].ID
	var rest []string
	for _, s := range d.info.Shards {
		if s.ID != x {
			rest = append(rest, s.ID)
		}
	}
	args := d.shardArgs(k.idx[x])

	var objs [][2]string
	write := func(key string, size int64, class string, seed uint64) {
		opts := minio.PutObjectOptions{DisableMultipart: true, StorageClass: class}
		if _, err := k.c.PutObject(ctx(t), bucket, key, bytes.NewReader(randomData(size, seed)), size, opts); err != nil {
			t.Fatalf("PUT %s: %v", key, err)
		}
		objs = append(objs, [2]string{bucket, key})
	}
	d.killShard(k.idx[x])
	write("early", 700<<10+1, "", 51) // before gossip noticed
	k.waitStates(t, 30*time.Second, rest, []string{x})
	write("striped", 1<<20+7, "", 52)
	write("small", 4<<10+3, "", 53)
	write("clay", 900<<10+5, "STANDARD_IA", 54)
	if err := k.whole(objs); err == nil {
		t.Fatal("the objects are whole with the server dead: the scenario did not happen")
	}

	d.restartShard(k.idx[x], args)
	restarted := time.Now()
	k.waitStates(t, 30*time.Second, append(slices.Clone(rest), x), nil)
	back := time.Now()
	var last error
	waitFor(t, 90*time.Second, "full redundancy after the return", func() bool {
		last = k.whole(objs)
		return last == nil
	})
	healed := time.Since(back)
	t.Logf("server back %s after its restart; every object whole %s after the gateway saw it alive", back.Sub(restarted).Round(100*time.Millisecond), healed.Round(100*time.Millisecond))
	if healed > 10*time.Second {
		t.Errorf("full redundancy took %s after the server's return, want at most 10s", healed.Round(100*time.Millisecond))
	}
	for _, o := range objs {
		if _, err := getBody(k.c, o[0], o[1]); err != nil {
			t.Errorf("GET %s: %v", o[1], err)
		}
	}
}

// Case 5b: MaxPrevious must not push out an acknowledged version. A
// version acknowledged on all nine servers is followed by five failed
// overwrites that each reach the same four servers (a gateway that
// crashes after its fourth manifest write, five times). Those four hold
// five newer versions; the acknowledged one must stay among their
// versions, with its shards, until the failed ones are rolled back: then
// it is current everywhere again and reads back byte-exact.
func TestConsistencyCase5MaxPreviousKeepsAcknowledged(t *testing.T) {
	e2e(t)
	d := startDev(t, "--shards", "9", "--gc-delay", "2s", "--rollback-after", "6s")
	k := newCons(t, d)
	const bucket, key = "case5b", "obj"
	mustMakeBucket(t, k.c, bucket)
	data := randomData(1<<20+9, 61)
	put(t, k.c, bucket, key, data, minio.PutObjectOptions{DisableMultipart: true})
	var m *metadata.Manifest
	for _, s := range d.info.Shards {
		if cur, _, err := k.versions(t, s.ID, bucket, key); err == nil && cur != nil {
			m = cur
			break
		}
	}
	if m == nil {
		t.Fatal("no server holds the manifest")
	}
	const failed = 5
	var fv []metadata.Version
	for i := range failed {
		f := *m
		f.Version = metadata.Version{TS: m.Version.TS + int64(i+1), Writer: "crashed-gateway"}
		f.ETag = "failed"
		f.Parts = []metadata.Part{m.Parts[0]}
		f.Parts[0].ID = fmt.Sprintf("failed%d", i)
		for _, id := range m.Placement[:4] {
			if _, _, err := k.rpc.PutManifest(ctx(t), k.addr(id), &f); err != nil {
				t.Fatal(err)
			}
		}
		fv = append(fv, f.Version)
	}
	intact := func(phase string) {
		t.Helper()
		for _, id := range m.Placement[:4] {
			cur, prev, err := k.versions(t, id, bucket, key)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(append(prev, cur), func(p *metadata.Manifest) bool { return p != nil && p.Version == m.Version }) {
				t.Errorf("%s: server %d no longer holds the acknowledged version %s", phase, k.idx[id], m.Version)
			}
		}
		for i, id := range m.Placement {
			if _, err := k.rpc.StatShard(ctx(t), k.addr(id), m.Parts[0].ID, i); err != nil {
				t.Errorf("%s: shard %d of the acknowledged version on server %d: %v", phase, i, k.idx[id], err)
			}
		}
		if got, err := getBody(k.c, bucket, key); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: GET: %v (%d bytes), want the acknowledged object", phase, err, len(got))
		}
	}
	// Past the GC delay and a GC round (every 5 s): a version pushed out
	// would be collected by now.
	time.Sleep(2*time.Second + 6*time.Second)
	intact(fmt.Sprintf("after %d failed overwrites", failed))
	waitFor(t, 150*time.Second, "the failed overwrites to be rolled back", func() bool {
		for _, id := range m.Placement[:4] {
			cur, prev, err := k.versions(t, id, bucket, key)
			if err == nil && cur == nil {
				t.Fatalf("server %d holds no version of the key: the acknowledged one was pushed out, then the failed ones rolled back", k.idx[id])
			}
			if err != nil || cur.Version != m.Version {
				return false
			}
			if slices.ContainsFunc(prev, func(p *metadata.Manifest) bool { return slices.Contains(fv, p.Version) }) {
				return false
			}
		}
		return true
	})
	intact("after the rollbacks")
}
