package tests

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/metadata"
)

// Case 1: a 404 that should be a 503, and a DELETE acknowledged but never
// done. rs-6-3 over exactly nine servers: two of the key's servers die,
// the PUT is acknowledged with 7 of 9; the two come back (without the
// object: nothing has healed them yet) and two OTHER servers die. Five
// servers hold the object now, fewer than the 6 a read needs, and seven
// answer: nobody can prove the key absent. GET and HEAD must answer 503,
// a listing must not silently leave the key out, and DELETE may answer
// 204 only if its tombstone is durable on a write quorum (7). When every
// server is back, the object (or the acknowledged delete) is as
// acknowledged.
func TestConsistencyCase1UnavailableIsNotAbsent(t *testing.T) {
	e2e(t)
	d := startDev(t, "--shards", "9", "--repair-grace", "10m")
	k := newCons(t, d)
	const bucket, key = "case1", "obj"
	mustMakeBucket(t, k.c, bucket)
	pl := k.order(bucket, key)
	first, second := pl[1:3], pl[3:5]
	others := func(skip ...[]string) []string {
		var out []string
		for _, id := range pl {
			if !slices.ContainsFunc(skip, func(s []string) bool { return slices.Contains(s, id) }) {
				out = append(out, id)
			}
		}
		return out
	}
	args := map[string][]string{}
	for _, id := range pl {
		args[id] = d.shardArgs(k.idx[id])
	}

	for _, id := range first {
		d.killShard(k.idx[id])
	}
	k.waitStates(t, 30*time.Second, others(first), first)
	data := randomData(1<<20+333, 11)
	info := put(t, k.c, bucket, key, data, minio.PutObjectOptions{DisableMultipart: true})
	var putV metadata.Version
	holders := 0
	for _, id := range others(first) {
		cur, _, err := k.versions(t, id, bucket, key)
		if err != nil {
			t.Fatal(err)
		}
		if cur != nil {
			holders++
			putV = cur.Version
		}
	}
	if holders != 7 {
		t.Fatalf("the PUT left its manifest on %d servers, the scenario needs 7 of 9", holders)
	}

	// The first two come back; at once, two others die. Healing the two
	// needs the object confirmed by a write quorum of holders (7), and
	// only five are left: they stay without it.
	for _, id := range first {
		d.restartShard(k.idx[id], args[id])
	}
	for _, id := range second {
		d.killShard(k.idx[id])
	}
	k.waitStates(t, 30*time.Second, others(second), second)
	for _, id := range first {
		if cur, _, err := k.versions(t, id, bucket, key); err != nil || cur != nil {
			t.Fatalf("server %s holds %v (err %v): healed before the second kill, the scenario did not happen", id, cur, err)
		}
	}
	t.Logf("object %s acknowledged (ETag %s) on 7 of 9; now 5 holders, 2 servers without it, 2 dead", putV, info.ETag)

	if _, err := getBody(k.c, bucket, key); httpStatus(err) != 503 {
		t.Errorf("GET with 5 of 9 holders reachable: %d (%v), want 503", httpStatus(err), err)
	}
	if _, err := k.c.StatObject(ctx(t), bucket, key, minio.StatObjectOptions{}); httpStatus(err) != 503 {
		t.Errorf("HEAD with 5 of 9 holders reachable: %d (%v), want 503", httpStatus(err), err)
	}
	listed, listErr := false, error(nil)
	for o := range k.c.ListObjects(ctx(t), bucket, minio.ListObjectsOptions{}) {
		if o.Err != nil {
			listErr = o.Err
			break
		}
		listed = listed || o.Key == key
	}
	switch {
	case listErr != nil && httpStatus(listErr) != 503:
		t.Errorf("listing: %v, want the key or 503", listErr)
	case listErr == nil && !listed:
		t.Errorf("listing answered without the key: it vanished silently")
	}

	delErr := k.c.RemoveObject(ctx(t), bucket, key, minio.RemoveObjectOptions{})
	t.Logf("DELETE answered %d (%v)", httpStatus(delErr), delErr)
	switch httpStatus(delErr) {
	case 200:
		// 204: the tombstone must be durable on a write quorum (7), and
		// only seven servers are up.
		tombs := 0
		for _, id := range others(second) {
			cur, _, err := k.versions(t, id, bucket, key)
			if err == nil && cur != nil && cur.Deleted && putV.Less(cur.Version) {
				tombs++
			}
		}
		if tombs < 7 {
			t.Errorf("DELETE answered 204 with its tombstone on %d servers, fewer than the write quorum 7", tombs)
		}
	case 503:
	default:
		t.Errorf("DELETE: %v, want 204 (tombstone on a write quorum) or 503", delErr)
	}

	// Everyone back: the outcome is what was acknowledged.
	for _, id := range second {
		d.restartShard(k.idx[id], args[id])
	}
	k.waitStates(t, 30*time.Second, pl, nil)
	var final string
	waitFor(t, 60*time.Second, "the object to answer again with all servers back", func() bool {
		got, err := getBody(k.c, bucket, key)
		switch {
		case err == nil && bytes.Equal(got, data):
			final = "the object"
		case err == nil:
			final = "other bytes"
		case minio.ToErrorResponse(err).Code == "NoSuchKey":
			final = "NoSuchKey"
		default:
			return false
		}
		return true
	})
	t.Logf("with every server back: %s", final)
	switch {
	case delErr == nil && final != "NoSuchKey":
		t.Errorf("DELETE was acknowledged (204), yet with all servers back GET finds %s", final)
	case delErr != nil && final == "other bytes":
		t.Errorf("GET returns bytes that were never written")
	}
}

// Case 3: a gateway whose clock is 10 minutes behind overwrites and
// deletes keys the normal gateway wrote. Its acknowledged writes come
// later in real time, so they must win: both gateways read them.
func TestConsistencyCase3SkewedGatewayWins(t *testing.T) {
	parallel(t)
	e2e(t)
	d := startDev(t)
	c1 := d.client(t)
	c2 := s3Client(t, startGateway(t, d, "--clock-offset", "-10m"), d.info.AccessKey, d.info.SecretKey)
	const bucket = "case3"
	mustMakeBucket(t, c1, bucket)
	waitFor(t, 10*time.Second, "bucket visible through the skewed gateway", func() bool {
		ok, _ := c2.BucketExists(ctx(t), bucket)
		return ok
	})
	gws := map[string]*minio.Client{"normal": c1, "skewed": c2}
	check := func(what, key string, want []byte) {
		t.Helper()
		for name, c := range gws {
			got, err := getBody(c, bucket, key)
			switch {
			case want == nil && minio.ToErrorResponse(err).Code != "NoSuchKey":
				t.Errorf("%s: GET %s through the %s gateway: %v (%d bytes), want NoSuchKey", what, key, name, err, len(got))
			case want != nil && (err != nil || !bytes.Equal(got, want)):
				t.Errorf("%s: GET %s through the %s gateway: %v, %d bytes, not the last acknowledged write", what, key, name, err, len(got))
			}
		}
	}
	for i, size := range []int64{5 << 10, 1<<20 + 3} { // inline and striped
		over, gone := fmt.Sprintf("over-%d", i), fmt.Sprintf("gone-%d", i)
		put(t, c1, bucket, over, randomData(size, uint64(300+i)), minio.PutObjectOptions{DisableMultipart: true})
		v2 := randomData(size, uint64(310+i))
		put(t, c2, bucket, over, v2, minio.PutObjectOptions{DisableMultipart: true})
		check("skewed overwrite", over, v2)
		// And back: the normal gateway overwrites the skewed one's write.
		v3 := randomData(size, uint64(320+i))
		put(t, c1, bucket, over, v3, minio.PutObjectOptions{DisableMultipart: true})
		check("normal overwrite after the skewed one", over, v3)
		v4 := randomData(size, uint64(330+i))
		put(t, c2, bucket, over, v4, minio.PutObjectOptions{DisableMultipart: true})
		check("second skewed overwrite", over, v4)

		put(t, c1, bucket, gone, randomData(size, uint64(340+i)), minio.PutObjectOptions{DisableMultipart: true})
		if err := c2.RemoveObject(ctx(t), bucket, gone, minio.RemoveObjectOptions{}); err != nil {
			t.Fatalf("DELETE through the skewed gateway: %v", err)
		}
		check("skewed delete", gone, nil)
		for o := range c1.ListObjects(ctx(t), bucket, minio.ListObjectsOptions{Prefix: gone}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			t.Errorf("skewed delete: %s still listed", o.Key)
		}
	}
}

// Case 4: conditional writes are atomic against every other write of the
// key. Each round races conditional writers through two gateways (If-Match
// on the current ETag, or If-None-Match: * on a new key) and, in half the
// rounds, unconditional writers of the same key. Every body is distinct,
// so the final value names its writer. A round is wrong if:
//   - two conditional writers won (the first changed the ETag, or created
//     the key, before the second committed);
//   - no writer won although only conditional writers ran and none failed
//     for another reason than its precondition;
//   - the final value is a conditional winner's while an unconditional
//     write was acknowledged: that write came before the winner (then the
//     winner's precondition failed) or after it (then it is final);
//   - an acknowledged write started after the final value's write had
//     been acknowledged (it was lost), or the final value is the old one
//     although some write was acknowledged.
func TestConsistencyCase4ConditionalWritesAreAtomic(t *testing.T) {
	parallel(t)
	e2e(t)
	d := startDev(t)
	gws := []*minio.Client{noRetryClient(t, d.info.Endpoint, d), noRetryClient(t, startGateway(t, d), d)}
	const bucket = "case4"
	mustMakeBucket(t, gws[0], bucket)
	waitFor(t, 10*time.Second, "bucket visible through the second gateway", func() bool {
		ok, _ := gws[1].BucketExists(ctx(t), bucket)
		return ok
	})
	type op struct {
		name       string
		cond       bool
		body       []byte
		start, end time.Time
		err        error
	}
	const rounds = 40
	violations := 0
	for round := range rounds {
		ifMatch := round%2 == 0
		mixed := round%3 != 2 // two rounds in three; the others alternate If-Match and If-None-Match too
		key := fmt.Sprintf("r%02d", round)
		size := int64(3 << 10) // inline
		if round%8 >= 4 {
			size = 200 << 10 // striped
		}
		body := func(who string) []byte {
			b := randomData(size, uint64(round*100+len(who)))
			copy(b, fmt.Sprintf("%s/%s/", key, who))
			return b
		}
		var v0 []byte
		opts := minio.PutObjectOptions{DisableMultipart: true}
		if ifMatch {
			v0 = body("v0")
			info := put(t, gws[0], bucket, key, v0, opts)
			opts.SetMatchETag(info.ETag)
		} else {
			opts.SetMatchETagExcept("*")
		}
		var ops []*op
		for i := range 4 {
			ops = append(ops, &op{name: fmt.Sprintf("cond%d", i), cond: true})
		}
		if mixed {
			for i := range 2 {
				ops = append(ops, &op{name: fmt.Sprintf("plain%d", i)})
			}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, o := range ops {
			o.body = body(o.name)
			c := gws[i%2]
			wg.Go(func() {
				po := minio.PutObjectOptions{DisableMultipart: true}
				if o.cond {
					po = opts
				}
				<-start
				o.start = time.Now()
				_, o.err = c.PutObject(context.Background(), bucket, key, bytes.NewReader(o.body), int64(len(o.body)), po)
				o.end = time.Now()
			})
		}
		close(start)
		wg.Wait()

		finals := map[string]bool{}
		var final []byte
		for _, c := range gws {
			got, err := getBody(c, bucket, key)
			if err != nil && minio.ToErrorResponse(err).Code != "NoSuchKey" {
				t.Fatalf("round %d: GET: %v", round, err)
			}
			final = got
			finals[sha(got)] = true
		}
		var summary []string
		wins, plainAcked, condLost, indeterminate := 0, 0, 0, 0
		var finalOp *op
		for _, o := range ops {
			code := minio.ToErrorResponse(o.err).Code
			switch {
			case o.err == nil && o.cond:
				wins++
			case o.err == nil:
				plainAcked++
			case o.cond && (code == "PreconditionFailed" || code == "ConditionalRequestConflict" || code == "NoSuchKey"):
				condLost++
			default:
				indeterminate++
			}
			if bytes.Equal(o.body, final) {
				finalOp = o
			}
			res := "ok"
			if o.err != nil {
				res = code
				if res == "" {
					res = o.err.Error()
				}
			}
			summary = append(summary, o.name+"="+res)
		}
		var bad []string
		if len(finals) != 1 {
			bad = append(bad, "the two gateways read different values")
		}
		if wins > 1 {
			bad = append(bad, fmt.Sprintf("%d conditional writers won", wins))
		}
		if !mixed && wins == 0 && indeterminate == 0 {
			bad = append(bad, "no conditional writer won and none failed for another reason")
		}
		switch {
		case finalOp == nil && (final == nil || bytes.Equal(final, v0)):
			if wins+plainAcked > 0 {
				bad = append(bad, "the key holds its old value although a write was acknowledged")
			}
		case finalOp == nil:
			bad = append(bad, "the key holds a value nobody wrote")
		default:
			if finalOp.cond && plainAcked > 0 {
				bad = append(bad, fmt.Sprintf("conditional %s is final although an unconditional write was acknowledged (it broke or overwrote the precondition)", finalOp.name))
			}
			for _, o := range ops {
				if o.err == nil && o != finalOp && o.start.After(finalOp.end) {
					bad = append(bad, fmt.Sprintf("%s was acknowledged, started after %s (final) was, and is lost", o.name, finalOp.name))
				}
			}
		}
		mode := "If-None-Match"
		if ifMatch {
			mode = "If-Match"
		}
		final4 := "(none)"
		if finalOp != nil {
			final4 = finalOp.name
		}
		t.Logf("round %d (%s, %d bytes, mixed %v): %s; final %s", round, mode, size, mixed, strings.Join(summary, " "), final4)
		for _, b := range bad {
			t.Errorf("round %d: %s", round, b)
			violations++
		}
	}
	t.Logf("%d violations in %d rounds", violations, rounds)
}
