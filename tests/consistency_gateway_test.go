package tests

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// Case 3: a gateway whose clock is 10 minutes behind overwrites and
// deletes keys the normal gateway wrote. Its acknowledged writes come
// later in real time, so they must win: both gateways read them.
func TestConsistencyCase3SkewedGatewayWins(t *testing.T) {
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
