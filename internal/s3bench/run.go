package s3bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Target is the S3 endpoint under test.
type Target struct {
	Endpoint string // http://host:port or https://host:port
	Access   string
	Secret   string
	Region   string // "" means us-east-1
}

// NewClient returns a minio-go client for t, path-style, with the region
// set so no location lookup precedes the first request.
func NewClient(t Target) (*minio.Client, error) {
	u, err := url.Parse(t.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("s3bench: endpoint %q: want http://host:port or https://host:port", t.Endpoint)
	}
	region := t.Region
	if region == "" {
		region = "us-east-1"
	}
	return minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(t.Access, t.Secret, ""),
		Secure:       u.Scheme == "https",
		Region:       region,
		BucketLookup: minio.BucketLookupPath,
	})
}

// ErrBucketNotEmpty is returned for a bucket that holds objects before the
// run: the run would mix its objects with someone's data and then delete
// what it wrote, so it refuses.
var ErrBucketNotEmpty = errors.New("s3bench: bucket is not empty")

// Run runs cfg's workloads against c and returns their results, in run
// order. It removes every object it wrote, and the bucket when it made it,
// also when it fails or ctx ends. An error means the run stopped; errors
// of single ops are counted in the results instead.
func Run(ctx context.Context, c *minio.Client, cfg Config) (results []Result, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{c: c, cfg: cfg, run: "rb-" + randHex(4)}
	created, err := r.openBucket(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		// NB: cleanup runs on its own context, so an interrupted run
		// still leaves nothing behind.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		if cerr := r.cleanup(cctx, created); cerr != nil && err == nil {
			err = cerr
		}
	}()
	emit := func(res Result) {
		results = append(results, res)
		if cfg.OnResult != nil {
			cfg.OnResult(res)
		}
	}
	for si, size := range cfg.Sizes {
		if !cfg.has(Put) && !cfg.has(Get) && !(si == 0 && cfg.has(Head)) {
			continue
		}
		set, err := r.newSet(size)
		if err != nil {
			return results, err
		}
		if cfg.has(Put) {
			emit(r.put(ctx, set, "put-"+SizeName(size), cfg.concurrency(size), cfg.Count, cfg.Duration))
		} else {
			// GET and HEAD need objects: load a few, untimed.
			res := r.put(ctx, set, "load-"+SizeName(size), cfg.concurrency(size), 4*cfg.concurrency(size), 0)
			if res.Errors > 0 {
				return results, fmt.Errorf("s3bench: loading %s objects: %d errors: %w", SizeName(size), res.Errors, set.firstErr)
			}
		}
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
		if cfg.has(Get) && set.count() > 0 {
			emit(r.get(ctx, set, cfg.concurrency(size)))
		}
		if si == 0 && cfg.has(Head) && set.count() > 0 {
			emit(r.head(ctx, set))
		}
		if err := r.removeSet(ctx, set); err != nil {
			return results, err
		}
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
	}
	if cfg.has(List) || cfg.has(Delete) {
		res, err := r.loadMeta(ctx)
		if err != nil {
			return results, err
		}
		if cfg.has(List) {
			for _, l := range r.listings() {
				emit(r.list(ctx, l))
				if ctx.Err() != nil {
					return results, ctx.Err()
				}
			}
		}
		if cfg.has(Delete) {
			emit(r.deleteMeta(ctx, res))
		}
	}
	return results, ctx.Err()
}

type runner struct {
	c   *minio.Client
	cfg Config
	run string // key prefix of this run: rb-<random>/

	mu      sync.Mutex
	written []string // keys not removed yet, for cleanup
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// openBucket makes the run's bucket, or checks that the named one is
// empty. It reports whether it made it.
func (r *runner) openBucket(ctx context.Context) (bool, error) {
	if r.cfg.Bucket == "" {
		r.cfg.Bucket = "regen-bench-" + randHex(4)
	}
	b := r.cfg.Bucket
	exists, err := r.c.BucketExists(ctx, b)
	if err != nil {
		return false, fmt.Errorf("s3bench: bucket %s: %w", b, err)
	}
	if !exists {
		if err := r.c.MakeBucket(ctx, b, minio.MakeBucketOptions{}); err != nil {
			return false, fmt.Errorf("s3bench: make bucket %s: %w", b, err)
		}
		return true, nil
	}
	key, err := r.firstKey(ctx, "")
	if err != nil {
		return false, fmt.Errorf("s3bench: list bucket %s: %w", b, err)
	}
	if key != "" {
		return false, fmt.Errorf("%w: %s holds %q (maybe more); name an empty bucket or none, and the bench makes its own", ErrBucketNotEmpty, b, key)
	}
	return false, nil
}

func (r *runner) noteWritten(key string) {
	r.mu.Lock()
	r.written = append(r.written, key)
	r.mu.Unlock()
}

// cleanup removes every key the run wrote and still holds, then the bucket
// if the run made it.
func (r *runner) cleanup(ctx context.Context, created bool) error {
	r.mu.Lock()
	keys := r.written
	r.written = nil
	r.mu.Unlock()
	if err := r.removeKeys(ctx, keys, nil); err != nil {
		return err
	}
	if created {
		if err := r.c.RemoveBucket(ctx, r.cfg.Bucket); err != nil {
			return fmt.Errorf("s3bench: remove bucket %s: %w", r.cfg.Bucket, err)
		}
	}
	return nil
}

// removeKeys deletes keys by DeleteObjects, one request per 1000 keys
// (S3's limit), calling each with the batch's latency and size when set.
func (r *runner) removeKeys(ctx context.Context, keys []string, each func(d time.Duration, n int, err error)) error {
	var firstErr error
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 1000)]
		keys = keys[len(batch):]
		ch := make(chan minio.ObjectInfo, len(batch))
		for _, k := range batch {
			ch <- minio.ObjectInfo{Key: k}
		}
		close(ch)
		t0 := time.Now()
		var berr error
		for e := range r.c.RemoveObjects(ctx, r.cfg.Bucket, ch, minio.RemoveObjectsOptions{}) {
			if berr == nil {
				berr = fmt.Errorf("s3bench: delete %s: %w", e.ObjectName, e.Err)
			}
		}
		if each != nil {
			each(time.Since(t0), len(batch), berr)
		}
		if berr != nil && firstErr == nil {
			firstErr = berr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return firstErr
}

// objectSet is the objects of one size: key i holds content body i.
type objectSet struct {
	size     int64
	content  *content
	prefix   string
	n        atomic.Int64 // objects written: keys 0..n-1 (some may have failed)
	okMu     sync.Mutex
	ok       []int // indexes written successfully, in completion order
	firstErr error
}

func (r *runner) newSet(size int64) (*objectSet, error) {
	ct, err := newContent(size)
	if err != nil {
		return nil, err
	}
	return &objectSet{size: size, content: ct, prefix: r.run + "/" + SizeName(size) + "/"}, nil
}

func (s *objectSet) key(i int) string { return fmt.Sprintf("%s%08d", s.prefix, i) }

func (s *objectSet) count() int {
	s.okMu.Lock()
	defer s.okMu.Unlock()
	return len(s.ok)
}

// pick returns the i-th written object, round robin.
func (s *objectSet) pick(i int64) int {
	s.okMu.Lock()
	defer s.okMu.Unlock()
	return s.ok[int(i%int64(len(s.ok)))]
}

// workers runs op in conc goroutines until count ops were started (if
// count > 0) or d has passed (if d > 0) or ctx ends. op gets the op's
// sequence number. Progress is reported meanwhile.
func (r *runner) workers(ctx context.Context, name string, conc, count int, d time.Duration, rec *recorder, op func(ctx context.Context, seq int64)) {
	var seq atomic.Int64
	deadline := time.Time{}
	if d > 0 {
		deadline = rec.start.Add(d)
	}
	defer r.watch(name, rec, int64(count), d)()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				i := seq.Add(1) - 1
				if count > 0 && i >= int64(count) {
					return
				}
				op(ctx, i)
			}
		}()
	}
	wg.Wait()
}

// watch reports rec's progress a few times a second until the returned
// func is called.
func (r *runner) watch(name string, rec *recorder, total int64, d time.Duration) (stop func()) {
	if r.cfg.OnProgress == nil {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				ops, errs, bytes, items, el := rec.snapshot()
				r.cfg.OnProgress(Progress{Workload: name, Ops: ops, Errors: errs, Bytes: bytes, Items: items, Elapsed: el, Total: total, Duration: d})
			}
		}
	}()
	return func() { close(quit); <-done }
}

// firstKey returns the first key listed under prefix, "" if none.
func (r *runner) firstKey(ctx context.Context, prefix string) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // NB: stops the client's listing goroutine after one entry
	for obj := range r.c.ListObjects(ctx, r.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, MaxKeys: 1}) {
		if obj.Err != nil {
			return "", obj.Err
		}
		//lint:ignore SA4004 the first entry is all we want
		return obj.Key, nil
	}
	return "", nil
}

func (r *runner) putOptions() minio.PutObjectOptions {
	return minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: r.cfg.PartSize}
}

// put writes new objects of set.
func (r *runner) put(ctx context.Context, set *objectSet, name string, conc, count int, d time.Duration) Result {
	rec := newRecorder()
	r.workers(ctx, name, conc, count, d, rec, func(ctx context.Context, _ int64) {
		i := int(set.n.Add(1) - 1)
		key := set.key(i)
		r.noteWritten(key)
		t0 := time.Now()
		_, err := r.c.PutObject(ctx, r.cfg.Bucket, key, set.content.body(i), set.size, r.putOptions())
		if err != nil {
			rec.fail(err)
			set.okMu.Lock()
			if set.firstErr == nil {
				set.firstErr = err
			}
			set.okMu.Unlock()
			return
		}
		rec.ok(time.Since(t0), set.size, 0)
		set.okMu.Lock()
		set.ok = append(set.ok, i)
		set.okMu.Unlock()
	})
	return rec.finish(name, set.size, conc)
}

// errMismatch marks a GET whose bytes are not the object's.
var errMismatch = errors.New("s3bench: GET returned other bytes than were PUT")

// get reads set's objects round robin and checks each body's SHA-256.
func (r *runner) get(ctx context.Context, set *objectSet, conc int) Result {
	name := "get-" + SizeName(set.size)
	rec := newRecorder()
	bufs := sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}
	r.workers(ctx, name, conc, r.cfg.Count, r.cfg.Duration, rec, func(ctx context.Context, seq int64) {
		i := set.pick(seq)
		t0 := time.Now()
		obj, err := r.c.GetObject(ctx, r.cfg.Bucket, set.key(i), minio.GetObjectOptions{})
		if err != nil {
			rec.fail(err)
			return
		}
		defer obj.Close()
		h := sha256.New()
		buf := bufs.Get().(*[]byte)
		defer bufs.Put(buf)
		// NB: io.CopyBuffer, not io.Copy: the hash has no ReadFrom, and
		// a large buffer keeps the client's syscalls few.
		n, err := io.CopyBuffer(h, struct{ io.Reader }{obj}, *buf)
		if err != nil {
			rec.fail(err)
			return
		}
		want := set.content.sum(i)
		if n != set.size || !bytes.Equal(h.Sum(nil), want[:]) {
			rec.fail(fmt.Errorf("%w: %s: %d bytes", errMismatch, set.key(i), n))
			return
		}
		rec.ok(time.Since(t0), n, 0)
	})
	return rec.finish(name, set.size, conc)
}

// head asks for set's objects round robin and checks their sizes.
func (r *runner) head(ctx context.Context, set *objectSet) Result {
	rec := newRecorder()
	conc := r.cfg.HeadConcurrency
	r.workers(ctx, Head, conc, r.cfg.Count, r.cfg.Duration, rec, func(ctx context.Context, seq int64) {
		i := set.pick(seq)
		t0 := time.Now()
		info, err := r.c.StatObject(ctx, r.cfg.Bucket, set.key(i), minio.StatObjectOptions{})
		if err != nil {
			rec.fail(err)
			return
		}
		if info.Size != set.size {
			rec.fail(fmt.Errorf("s3bench: HEAD %s: size %d, want %d", set.key(i), info.Size, set.size))
			return
		}
		rec.ok(time.Since(t0), 0, 0)
	})
	return rec.finish(Head, set.size, conc)
}

// removeSet deletes set's objects (untimed).
func (r *runner) removeSet(ctx context.Context, set *objectSet) error {
	n := int(set.n.Load())
	keys := make([]string, n)
	for i := range n {
		keys[i] = set.key(i)
	}
	if err := r.removeKeys(ctx, keys, nil); err != nil {
		return err
	}
	r.forget(set.prefix)
	return nil
}

// forget drops keys under prefix from the cleanup list.
func (r *runner) forget(prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.written[:0]
	for _, k := range r.written {
		if len(k) < len(prefix) || k[:len(prefix)] != prefix {
			kept = append(kept, k)
		}
	}
	r.written = kept
}

// metaSet is the listing set: objects spread evenly over prefixes.
type metaSet struct {
	root string   // run/meta/
	keys []string // sorted
}

func (r *runner) metaKey(root string, i int) string {
	return fmt.Sprintf("%sp%03d/o%06d", root, i%r.cfg.MetaPrefixes, i)
}

// loadMeta writes the listing set (untimed; progress is shown).
func (r *runner) loadMeta(ctx context.Context) (*metaSet, error) {
	ms := &metaSet{root: r.run + "/meta/"}
	ct, err := newContent(r.cfg.MetaSize)
	if err != nil {
		return nil, err
	}
	rec := newRecorder()
	r.workers(ctx, "load-listing-set", r.cfg.MetaConcurrency, r.cfg.MetaObjects, 0, rec, func(ctx context.Context, seq int64) {
		key := r.metaKey(ms.root, int(seq))
		r.noteWritten(key)
		if _, err := r.c.PutObject(ctx, r.cfg.Bucket, key, ct.body(int(seq)), ct.size, r.putOptions()); err != nil {
			rec.fail(err)
			return
		}
		rec.ok(0, ct.size, 1)
	})
	if _, errs, _, _, _ := rec.snapshot(); errs > 0 {
		return nil, fmt.Errorf("s3bench: loading the listing set: %d errors, first: %w", errs, rec.first)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for i := range r.cfg.MetaObjects {
		ms.keys = append(ms.keys, r.metaKey(ms.root, i))
	}
	return ms, nil
}

// listing is one listing workload: what is asked and how many entries
// (objects plus common prefixes) the answer must have.
type listing struct {
	name      string
	opts      minio.ListObjectsOptions
	wantItems int
}

func (r *runner) listings() []listing {
	root := r.run + "/meta/"
	n, p := r.cfg.MetaObjects, r.cfg.MetaPrefixes
	inFirst := (n + p - 1) / p // objects i with i % p == 0
	return []listing{
		{"list-recursive", minio.ListObjectsOptions{Prefix: root, Recursive: true}, n},
		{"list-delimiter", minio.ListObjectsOptions{Prefix: root}, p},
		{"list-prefix", minio.ListObjectsOptions{Prefix: fmt.Sprintf("%sp%03d/", root, 0), Recursive: true}, inFirst},
	}
}

// list runs one listing again and again, one at a time (a listing is a
// sequence of pages), and checks each answer's size.
func (r *runner) list(ctx context.Context, l listing) Result {
	rec := newRecorder()
	r.workers(ctx, l.name, 1, r.cfg.Count, r.cfg.Duration, rec, func(ctx context.Context, _ int64) {
		t0 := time.Now()
		got := 0
		for obj := range r.c.ListObjects(ctx, r.cfg.Bucket, l.opts) {
			if obj.Err != nil {
				rec.fail(obj.Err)
				return
			}
			got++
		}
		if got != l.wantItems {
			rec.fail(fmt.Errorf("s3bench: %s listed %d entries, want %d", l.name, got, l.wantItems))
			return
		}
		rec.ok(time.Since(t0), 0, int64(got))
	})
	return rec.finish(l.name, 0, 1)
}

// deleteMeta removes the listing set by DeleteObjects, 1000 keys a
// request, and checks that nothing of it is listed afterwards.
func (r *runner) deleteMeta(ctx context.Context, ms *metaSet) Result {
	rec := newRecorder()
	name := "delete-objects"
	stop := r.watch(name, rec, int64((len(ms.keys)+999)/1000), 0)
	_ = r.removeKeys(ctx, ms.keys, func(d time.Duration, n int, err error) {
		if err != nil {
			rec.fail(err)
			return
		}
		rec.ok(d, 0, int64(n))
	})
	res := rec.finish(name, 0, 1)
	stop()
	if key, err := r.firstKey(ctx, ms.root); err != nil || key != "" {
		res.Errors++ // a key acknowledged deleted is still listed, or the check failed
	}
	if res.Errors == 0 {
		r.forget(ms.root)
	}
	return res
}
