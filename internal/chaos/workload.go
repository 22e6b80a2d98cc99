package chaos

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Workload is concurrent S3 clients doing PUT (plain, If-Match on the
// ETag they saw last, If-None-Match: *), GET, HEAD and DELETE on a few
// keys through every gateway, each operation recorded in a History.
type Workload struct {
	Endpoints            []string // gateways' host:port
	AccessKey, SecretKey string
	Keys                 []string // bucket/key
	Clients              int
	Seed                 uint64
	// OpTimeout bounds one operation; past it the client gives up and the
	// operation is indeterminate.
	OpTimeout time.Duration
	// MaxValue is the largest value written (values range from 1 KiB).
	MaxValue int

	History *History

	// Counters for the progress line.
	NOps, NAcked, NFailed atomic.Int64
	// NRefused counts operations whose connection was refused (a gateway
	// down): never sent, so not in the history.
	NRefused atomic.Int64

	clients []*minio.Client
}

// Connect makes one S3 client per gateway. minio-go's own retries are off:
// a retried write is two writes, and a retried conditional write can fail
// on its own first attempt's success.
func (w *Workload) Connect() error {
	w.clients = nil
	for _, ep := range w.Endpoints {
		c, err := minio.New(ep, &minio.Options{
			Creds:      credentials.NewStaticV4(w.AccessKey, w.SecretKey, ""),
			Region:     "us-east-1",
			MaxRetries: 1,
		})
		if err != nil {
			return fmt.Errorf("S3 client for %s: %w", ep, err)
		}
		w.clients = append(w.clients, c)
	}
	return nil
}

// Run runs the clients until ctx ends.
func (w *Workload) Run(ctx context.Context) {
	done := make(chan struct{})
	for i := range w.Clients {
		go func() {
			defer func() { done <- struct{}{} }()
			w.client(ctx, i)
		}()
	}
	for range w.Clients {
		<-done
	}
}

// client is one client's loop.
func (w *Workload) client(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(w.Seed, uint64(id)+1))
	seen := map[string]string{} // key -> the ETag this client saw last
	for seq := 0; ctx.Err() == nil; seq++ {
		key := w.Keys[rng.IntN(len(w.Keys))]
		gw := rng.IntN(len(w.clients))
		var o Op
		switch p := rng.IntN(100); {
		case p < 30:
			o = w.put(ctx, id, gw, key, seq, rng, NoCond, "")
		case p < 40:
			if e := seen[key]; e != "" {
				o = w.put(ctx, id, gw, key, seq, rng, IfMatch, e)
			} else {
				o = w.put(ctx, id, gw, key, seq, rng, IfNoneMatch, "")
			}
		case p < 48:
			o = w.put(ctx, id, gw, key, seq, rng, IfNoneMatch, "")
		case p < 75:
			o = w.get(ctx, id, gw, key)
		case p < 88:
			o = w.head(ctx, id, gw, key)
		case p < 98:
			var more []Op
			o, more = w.del(ctx, id, gw, key, seq%2 == 1, rng)
			for _, m := range more {
				if m.Err != errRefused { // NB: not sent
					w.record(m)
				}
			}
		default:
			bucket, _ := split(key)
			o = w.list(ctx, id, gw, bucket, seq%2 == 1)
		}
		if o.Err == errRefused {
			w.NRefused.Add(1)
			// Not sent: wait a little rather than spin on a dead gateway.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if ctx.Err() != nil && o.Result == Failed && strings.Contains(o.Err, "context canceled") {
			// Cut short by the end of the run: a write stays in the
			// history as indeterminate, a read tells nothing.
			if !o.write() {
				continue
			}
		}
		switch {
		case o.Kind == Put && o.Result == OK, (o.Kind == Get || o.Kind == Head) && o.Result == OK:
			seen[key] = o.Value
		case o.Kind != List && o.Result == NotFound:
			delete(seen, key)
		}
		w.record(o)
	}
}

func (w *Workload) record(o Op) {
	w.History.Add(o)
	w.NOps.Add(1)
	if o.write() && o.Result == OK {
		w.NAcked.Add(1)
	}
	if o.Result == Failed {
		w.NFailed.Add(1)
	}
}

// errRefused marks an operation whose connection was refused.
const errRefused = "connection refused"

// Value returns a value's bytes: a header naming its writer, then
// pseudo-random bytes from (seed, client, seq), so every value is unique
// and can be made again from its name.
func Value(seed uint64, client, seq, size int) []byte {
	b := make([]byte, size)
	n := copy(b, fmt.Sprintf("regen chaos seed=%d client=%d seq=%d\n", seed, client, seq))
	r := rand.New(rand.NewPCG(seed^uint64(client)<<32, uint64(seq)))
	for i := n; i < size; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

// size picks a value size: mostly small (stored inline in the manifest),
// some of one stripe, some of several.
func (w *Workload) size(rng *rand.Rand) int {
	switch p := rng.IntN(100); {
	case p < 50:
		return 1<<10 + rng.IntN(63<<10)
	case p < 80:
		return 128<<10 + rng.IntN(896<<10)
	default:
		return 1<<20 + rng.IntN(max(w.MaxValue-1<<20, 1))
	}
}

func split(key string) (string, string) {
	b, k, _ := strings.Cut(key, "/")
	return b, k
}

func (w *Workload) begin(ctx context.Context) (context.Context, context.CancelFunc, time.Time) {
	c, cancel := context.WithTimeout(ctx, w.OpTimeout)
	return c, cancel, time.Now()
}

func (w *Workload) finish(o *Op, start time.Time, err error) {
	o.Start, o.End = w.History.Since(start), w.History.Since(time.Now())
	if err != nil && o.Result == Failed {
		o.Err = errText(err)
	}
}

func (w *Workload) put(ctx context.Context, client, gw int, key string, seq int, rng *rand.Rand, cond Cond, match string) Op {
	body := Value(w.Seed, client, seq, w.size(rng))
	sum := md5.Sum(body)
	o := Op{Client: client, Gateway: gw, Key: key, Kind: Put, Cond: cond, Match: match, Value: hex.EncodeToString(sum[:])}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
	switch cond {
	case IfMatch:
		opts.SetMatchETag(match)
	case IfNoneMatch:
		opts.SetMatchETagExcept("*")
	}
	bucket, k := split(key)
	c, cancel, start := w.begin(ctx)
	info, err := w.clients[gw].PutObject(c, bucket, k, bytes.NewReader(body), int64(len(body)), opts)
	cancel()
	o.Result = classify(err, cond)
	if err == nil && info.ETag != o.Value {
		// Acknowledged with another ETag: keep the value written, note it;
		// reads will show what the store holds.
		o.Err = "acknowledged with ETag " + info.ETag
	}
	w.finish(&o, start, err)
	return o
}

func (w *Workload) get(ctx context.Context, client, gw int, key string) Op {
	o := Op{Client: client, Gateway: gw, Key: key, Kind: Get}
	bucket, k := split(key)
	c, cancel, start := w.begin(ctx)
	defer cancel()
	obj, err := w.clients[gw].GetObject(c, bucket, k, minio.GetObjectOptions{})
	var body []byte
	if err == nil {
		body, err = io.ReadAll(obj)
	}
	var etag string
	if err == nil {
		var st minio.ObjectInfo
		if st, err = obj.Stat(); err == nil {
			etag = st.ETag
		}
	}
	if obj != nil {
		obj.Close()
	}
	o.Result = classify(err, readCond)
	if err == nil {
		sum := md5.Sum(body)
		o.Value = hex.EncodeToString(sum[:])
		if etag != o.Value {
			// The bytes are what counts: a value no PUT wrote convicts.
			o.Err = "ETag " + etag + " but the body's MD5 differs"
		}
	}
	w.finish(&o, start, err)
	return o
}

func (w *Workload) head(ctx context.Context, client, gw int, key string) Op {
	o := Op{Client: client, Gateway: gw, Key: key, Kind: Head}
	bucket, k := split(key)
	c, cancel, start := w.begin(ctx)
	st, err := w.clients[gw].StatObject(c, bucket, k, minio.StatObjectOptions{})
	cancel()
	o.Result = classify(err, readCond)
	if err == nil {
		o.Value = st.ETag
	}
	w.finish(&o, start, err)
	return o
}

// del deletes key through gateway gw: by DELETE, or, batched, by a
// DeleteObjects request (every other delete of a client) of key and up to
// two other keys of its bucket, so that a shard server's batch of
// tombstones holds several keys (one pebble batch, metadata
// PutManifestsQueued). Each key of a request is an operation of its own
// with the request's times: o is key's, more the others'.
func (w *Workload) del(ctx context.Context, client, gw int, key string, batched bool, rng *rand.Rand) (o Op, more []Op) {
	bucket, k := split(key)
	keys := []string{k}
	if batched {
		for range rng.IntN(3) {
			if b, name := split(w.Keys[rng.IntN(len(w.Keys))]); b == bucket && !slices.Contains(keys, name) {
				keys = append(keys, name)
			}
		}
	}
	errs := make([]error, len(keys))
	c, cancel, start := w.begin(ctx)
	if batched {
		// NB: DeleteObjects takes its own path (batched lookups and
		// tombstones, gateway/delete_batch.go), with the same promises.
		objs := make(chan minio.ObjectInfo, len(keys))
		for _, k := range keys {
			objs <- minio.ObjectInfo{Key: k}
		}
		close(objs)
		var reqErr error // one with no key: the request failed
		for e := range w.clients[gw].RemoveObjects(c, bucket, objs, minio.RemoveObjectsOptions{}) {
			if i := slices.Index(keys, e.ObjectName); i >= 0 {
				errs[i] = e.Err
			} else if reqErr == nil {
				reqErr = e.Err
			}
		}
		for i := range errs {
			if errs[i] == nil {
				errs[i] = reqErr
			}
		}
	} else {
		errs[0] = w.clients[gw].RemoveObject(c, bucket, k, minio.RemoveObjectOptions{})
	}
	cancel()
	ops := make([]Op, len(keys))
	for i, k := range keys {
		ops[i] = Op{Client: client, Gateway: gw, Key: bucket + "/" + k, Kind: Delete}
		ops[i].Result = classify(errs[i], NoCond)
		if ops[i].Result != OK {
			ops[i].Result = Failed // S3 answers 204 whether or not the key exists
		}
		w.finish(&ops[i], start, errs[i])
	}
	return ops[0], ops[1:]
}

// ListDelimiter is the delimiter of the workload's delimiter listings.
// The keys are key-00, key-01, ...: "-0" rolls key-00 to key-09 up into
// the common prefix "key-0" and leaves the others keys, so one page holds
// both, and the prefix is never a key's name.
const ListDelimiter = "-0"

// list lists bucket through gateway gw, recursively or by ListDelimiter.
func (w *Workload) list(ctx context.Context, client, gw int, bucket string, delimited bool) Op {
	o := Op{Client: client, Gateway: gw, Key: bucket + "/", Kind: List}
	if delimited {
		o.Delimiter = ListDelimiter
	}
	c, cancel, start := w.begin(ctx)
	var err error
	o.Listed = []string{}
	if delimited {
		err = w.listDelimited(c, gw, bucket, &o)
	} else {
		for obj := range w.clients[gw].ListObjects(c, bucket, minio.ListObjectsOptions{Recursive: true}) {
			if obj.Err != nil {
				err = obj.Err
				break
			}
			o.Listed = append(o.Listed, bucket+"/"+obj.Key)
		}
	}
	cancel()
	o.Result = classify(err, NoCond)
	if o.Result != OK {
		o.Result, o.Listed = Failed, nil
	}
	w.finish(&o, start, err)
	return o
}

// listDelimited pages through a ListObjectsV2 of bucket with
// ListDelimiter. minio-go's ListObjects only knows "/", and its Core
// call takes no context: it runs on its own goroutine, abandoned (to end
// when its connection does) once ctx ends, so the operation is still
// bounded by OpTimeout.
func (w *Workload) listDelimited(ctx context.Context, gw int, bucket string, o *Op) error {
	type page struct {
		res minio.ListBucketV2Result
		err error
	}
	core := minio.Core{Client: w.clients[gw]}
	token := ""
	for {
		ch := make(chan page, 1)
		go func() {
			res, err := core.ListObjectsV2(bucket, "", "", token, ListDelimiter, 1000)
			ch <- page{res, err}
		}()
		var p page
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p = <-ch:
		}
		if p.err != nil {
			return p.err
		}
		for _, obj := range p.res.Contents {
			o.Listed = append(o.Listed, bucket+"/"+obj.Key)
		}
		for _, cp := range p.res.CommonPrefixes {
			o.Listed = append(o.Listed, bucket+"/"+cp.Prefix)
		}
		if !p.res.IsTruncated || p.res.NextContinuationToken == "" {
			return nil
		}
		token = p.res.NextContinuationToken
	}
}

// Read is one read of the durability check, through gateway gw.
func (w *Workload) Read(ctx context.Context, gw int, key string) Op {
	o := w.get(ctx, w.Clients, gw, key) // one more client: the checker's
	o.Final = true
	return o
}

// readCond stands for reads in classify.
const readCond Cond = 255

// classify maps an S3 error to a result. A 404 NoSuchKey is an answer (no
// object) for reads and If-Match writes, a 412 for conditional writes; any
// other error leaves the operation indeterminate.
func classify(err error, cond Cond) Result {
	if err == nil {
		return OK
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.StatusCode == http.StatusNotFound && resp.Code == "NoSuchKey" && (cond == readCond || cond == IfMatch):
		return NotFound
	case resp.StatusCode == http.StatusPreconditionFailed && (cond == IfMatch || cond == IfNoneMatch):
		return PreconditionFailed
	}
	return Failed
}

// errText is an error as the history shows it; a refused connection is
// errRefused.
func errText(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return errRefused
	}
	resp := minio.ToErrorResponse(err)
	if resp.StatusCode != 0 {
		return fmt.Sprintf("%d %s", resp.StatusCode, resp.Code)
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
