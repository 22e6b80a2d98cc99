package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/regen-s3/regen/internal/pause"
	"github.com/regen-s3/regen/metadata"
)

// Client calls shard servers. It is safe for concurrent use; share one.
// Make it with New: the signing of requests lives in its HTTP client's
// transport.
type Client struct {
	// HTTP carries the requests, signing each (NewAuthTransport). It must
	// not have a whole-request Timeout: shard streams are long. Bound
	// calls with their ctx instead.
	HTTP *http.Client
}

// New returns a client that signs its requests with the key derived from
// the cluster secret. A nil httpClient means NewHTTPClient(); for TLS pass
// WithTLS(httpClient, config). httpClient itself is not changed.
func New(secret string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = NewHTTPClient()
	}
	hc := *httpClient
	hc.Transport = NewAuthTransport(secret, hc.Transport)
	return &Client{HTTP: &hc}
}

// NewHTTPClient returns an HTTP client tuned for shard traffic: many
// parallel streams to few hosts, fast failure on dead peers, no overall
// timeout.
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		// Intra-cluster traffic never goes through a proxy.
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second, // a peer that cannot accept in 5s is as good as dead
			KeepAlive: 30 * time.Second,
		}).DialContext,
		// Gateways stream many shards to each peer at once (a stripe per
		// PUT, many PUTs); idle connections are kept so that they are reused
		// rather than re-dialled.
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
		// Starts after the request body is sent, so it covers the server's
		// fsync of a shard or manifest but not the upload itself.
		ResponseHeaderTimeout: 60 * time.Second,
		// Shards are incompressible and JSON replies small.
		DisableCompression: true,
	}}
}

// PutShard stores body as shard idx of fileID on addr and returns the size
// and CRC-32C the server computed. body may be of unknown length (it is
// then sent chunked). A nil error means the shard is durable.
func (c *Client) PutShard(ctx context.Context, addr, fileID string, idx int, body io.Reader) (ShardInfo, error) {
	op := fmt.Sprintf("put shard %s.%d", fileID, idx)
	if err := ValidateShardName(fileID, idx); err != nil {
		return ShardInfo{}, &NodeError{Addr: addr, Op: op, Err: err}
	}
	var info ShardInfo
	err := c.call(ctx, addr, op, http.MethodPut, ShardPath(fileID, idx), nil, body, &info)
	return info, err
}

// GetShard streams length bytes of shard idx of fileID from offset off
// (length -1: to the end). The reader returns an error wrapping ErrCorrupt
// if a block fails its checksum (met by the server, or by the reader in a
// framed stream: see frames.go), and one wrapping
// io.ErrUnexpectedEOF if the stream ends short. The caller must Close it.
func (c *Client) GetShard(ctx context.Context, addr, fileID string, idx int, off, length int64) (io.ReadCloser, error) {
	op := fmt.Sprintf("get shard %s.%d", fileID, idx)
	if err := ValidateShardName(fileID, idx); err != nil {
		return nil, &NodeError{Addr: addr, Op: op, Err: err}
	}
	q := url.Values{ParamOffset: {strconv.FormatInt(off, 10)}, ParamLength: {strconv.FormatInt(length, 10)}, ParamFramed: {"1"}}
	resp, err := c.do(ctx, addr, op, http.MethodGet, ShardPath(fileID, idx), q, nil)
	if err != nil {
		return nil, err
	}
	bad := func(err error) (io.ReadCloser, error) {
		resp.Body.Close()
		return nil, &NodeError{Addr: addr, Op: op, Err: err}
	}
	want, perr := strconv.ParseInt(resp.Header.Get(HeaderLength), 10, 64)
	if perr != nil || want < 0 {
		return bad(fmt.Errorf("bad %s header %q", HeaderLength, resp.Header.Get(HeaderLength)))
	}
	r := &shardReader{resp: resp, body: resp.Body, want: want, addr: addr, op: op}
	if h := resp.Header.Get(HeaderBlockSize); h != "" {
		bs, err1 := strconv.ParseInt(h, 10, 64)
		size, err2 := strconv.ParseInt(resp.Header.Get(HeaderSize), 10, 64)
		if err1 != nil || err2 != nil || bs <= 0 || off+want > size {
			return bad(fmt.Errorf("bad framing headers: block size %q, size %q for %d bytes from %d", h, resp.Header.Get(HeaderSize), want, off))
		}
		if n := FramedLength(bs, size, off, want); resp.ContentLength != n {
			return bad(fmt.Errorf("framed body of %d bytes, want %d", resp.ContentLength, n))
		}
		r.body = &frameReader{body: resp.Body, bs: bs, size: size, pos: off, end: off + want}
	}
	return r, nil
}

// shardReader checks a shard stream's length and trailer; a framed
// stream's blocks are checked by its frameReader.
type shardReader struct {
	resp     *http.Response
	body     io.Reader // resp.Body, or a frameReader over it
	want, n  int64
	addr, op string
	err      error // sticky, once the stream has ended or failed
}

func (r *shardReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.body.Read(p)
	r.n += int64(n)
	switch {
	case r.n > r.want:
		r.err = r.fail(fmt.Errorf("stream longer than the announced %d bytes", r.want))
	case err == io.EOF:
		// Trailers are only readable once the body is at EOF.
		if r.resp.Trailer.Get(TrailerError) == TrailerCorrupt {
			r.err = r.fail(fmt.Errorf("%w: checksum failure after %d bytes", ErrCorrupt, r.n))
		} else if t := r.resp.Trailer.Get(TrailerError); t != "" {
			r.err = r.fail(fmt.Errorf("server failed after %d bytes: %s: %w", r.n, t, io.ErrUnexpectedEOF))
		} else if r.n < r.want {
			r.err = r.fail(fmt.Errorf("got %d of %d bytes: %w", r.n, r.want, io.ErrUnexpectedEOF))
		} else {
			r.err = io.EOF
		}
	case err != nil:
		r.err = r.fail(err)
	}
	if r.err != nil && r.err != io.EOF {
		// NB: never hand out bytes of a stream known to be bad alongside a
		// nil error; the caller sees them together with the error.
		return n, r.err
	}
	if n > 0 {
		return n, nil
	}
	return 0, r.err
}

func (r *shardReader) fail(err error) error {
	return &NodeError{Addr: r.addr, Op: r.op, Err: err}
}

func (r *shardReader) Close() error { return r.resp.Body.Close() }

// StatShard returns the size and CRC-32C of shard idx of fileID.
func (c *Client) StatShard(ctx context.Context, addr, fileID string, idx int) (ShardInfo, error) {
	op := fmt.Sprintf("stat shard %s.%d", fileID, idx)
	if err := ValidateShardName(fileID, idx); err != nil {
		return ShardInfo{}, &NodeError{Addr: addr, Op: op, Err: err}
	}
	resp, err := c.do(ctx, addr, op, http.MethodHead, ShardPath(fileID, idx), nil, nil)
	if err != nil {
		return ShardInfo{}, err
	}
	resp.Body.Close()
	size, err1 := strconv.ParseInt(resp.Header.Get(HeaderSize), 10, 64)
	crc, err2 := strconv.ParseUint(resp.Header.Get(HeaderCRC), 10, 32)
	if err1 != nil || err2 != nil {
		return ShardInfo{}, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("bad stat headers %q %q", resp.Header.Get(HeaderSize), resp.Header.Get(HeaderCRC))}
	}
	return ShardInfo{Size: size, CRC: uint32(crc)}, nil
}

// DeleteShard removes shard idx of fileID. Deleting an absent shard
// succeeds, so retries are harmless.
func (c *Client) DeleteShard(ctx context.Context, addr, fileID string, idx int) error {
	op := fmt.Sprintf("delete shard %s.%d", fileID, idx)
	if err := ValidateShardName(fileID, idx); err != nil {
		return &NodeError{Addr: addr, Op: op, Err: err}
	}
	return c.call(ctx, addr, op, http.MethodDelete, ShardPath(fileID, idx), nil, nil, nil)
}

// PutManifest stores m on addr if it is newer than the node's current
// manifest for the key. It returns whether it was stored and the version
// now current there. A nil error means the node's state is durable.
func (c *Client) PutManifest(ctx context.Context, addr string, m *metadata.Manifest) (stored bool, current metadata.Version, err error) {
	resp, err := c.putManifest(ctx, addr, m, nil)
	return resp.Stored, resp.Current, err
}

// PutVersion stores m, a repair switch of a noncurrent version (older
// than the key's current one), and reports whether the node holds m's
// version afterwards: kept as a previous version beside a newer current
// one, current where the node knows of nothing newer, or held already.
// The node stores it as PutManifest would, but fenced like a client
// write made without the key's lease (NoLease: refused with
// ErrLeaseHeld while an update of the key holds it); only the answer
// differs, since "stored as current" is not what such a write is for.
func (c *Client) PutVersion(ctx context.Context, addr string, m *metadata.Manifest) (held bool, err error) {
	resp, err := c.putManifest(ctx, addr, m, url.Values{ParamLease: {NoLease}})
	return resp.Held, err
}

// PutManifestFenced stores m as a client write fenced by the key's lease:
// lease is the holder of the key's lease (LeaseName) that the writer holds
// on addr, or NoLease. The server refuses the write with ErrLeaseHeld
// when the key's lease is held by someone else (or, for a holder, when it
// no longer holds it), so a write checked under a lease cannot be
// overtaken by one that did not take it. The response says whether m was
// stored, the version now current there, and whether m replaced one.
func (c *Client) PutManifestFenced(ctx context.Context, addr string, m *metadata.Manifest, lease string) (PutManifestResponse, error) {
	return c.putManifest(ctx, addr, m, url.Values{ParamLease: {lease}})
}

func (c *Client) putManifest(ctx context.Context, addr string, m *metadata.Manifest, q url.Values) (PutManifestResponse, error) {
	op := fmt.Sprintf("put manifest %s/%s", m.Bucket, m.Key)
	body, err := json.Marshal(m)
	if err != nil {
		return PutManifestResponse{}, &NodeError{Addr: addr, Op: op, Err: err}
	}
	var resp PutManifestResponse
	if err := c.call(ctx, addr, op, http.MethodPost, PathManifests, q, bytes.NewReader(body), &resp); err != nil {
		return PutManifestResponse{}, err
	}
	return resp, nil
}

// GetManifest returns the node's current manifest of (bucket, key), a
// tombstone included (Deleted set); ErrNotFound when it has none.
func (c *Client) GetManifest(ctx context.Context, addr, bucket, key string) (*metadata.Manifest, error) {
	op := fmt.Sprintf("get manifest %s/%s", bucket, key)
	q := url.Values{ParamBucket: {bucket}, ParamKey: {key}}
	m := new(metadata.Manifest)
	if err := c.call(ctx, addr, op, http.MethodGet, PathManifests, q, nil, m); err != nil {
		return nil, err
	}
	return m, nil
}

// List returns one page of the node's listing (tombstones included) and
// whether more entries follow. It asks for the binary page (see
// AppendList) and takes JSON from a server that predates it.
func (c *Client) List(ctx context.Context, addr string, lq metadata.ListQuery) ([]metadata.ListEntry, bool, error) {
	op := fmt.Sprintf("list %s/%s", lq.Bucket, lq.Prefix)
	q := url.Values{
		ParamBucket:    {lq.Bucket},
		ParamPrefix:    {lq.Prefix},
		ParamDelimiter: {lq.Delimiter},
		ParamAfter:     {lq.After},
		ParamLimit:     {strconv.Itoa(lq.Limit)},
		ParamFormat:    {FormatBinary},
	}
	if lq.Unsure {
		q.Set(ParamUnsure, "1")
	}
	resp, err := c.do(ctx, addr, op, http.MethodGet, PathList, q, nil)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != ContentTypeList {
		var lr ListResponse
		if err := json.NewDecoder(resp.Body).Decode(&lr); err != nil {
			return nil, false, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("decode reply: %w", err)}
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // see call
		return lr.Entries, lr.Truncated, nil
	}
	// NB: the announced length only sizes the buffer, within reason.
	buf := bytes.NewBuffer(make([]byte, 0, int(min(max(resp.ContentLength, 0), maxListReply))+bytes.MinRead))
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, false, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("read reply: %w", err)}
	}
	es, truncated, err := DecodeList(buf.Bytes())
	if err != nil {
		return nil, false, &NodeError{Addr: addr, Op: op, Err: err}
	}
	return es, truncated, nil
}

// PutBucket stores the bucket record on addr if it is newer than the
// node's.
func (c *Client) PutBucket(ctx context.Context, addr string, b *metadata.Bucket) error {
	return c.putBucket(ctx, addr, b, nil)
}

// PutBucketFenced is PutBucket made under the bucket record's lease
// (BucketLeaseName) held by lease: the node refuses it (ErrLeaseHeld)
// unless lease holds it and has not expired, so a writer whose lease ran
// out cannot land over the next holder's update.
func (c *Client) PutBucketFenced(ctx context.Context, addr string, b *metadata.Bucket, lease string) error {
	return c.putBucket(ctx, addr, b, url.Values{ParamLease: {lease}})
}

func (c *Client) putBucket(ctx context.Context, addr string, b *metadata.Bucket, q url.Values) error {
	op := "put bucket " + b.Name
	body, err := json.Marshal(b)
	if err != nil {
		return &NodeError{Addr: addr, Op: op, Err: err}
	}
	return c.call(ctx, addr, op, http.MethodPost, PathBuckets, q, bytes.NewReader(body), &PutBucketResponse{})
}

// ListBuckets returns every bucket record of addr, tombstones included.
func (c *Client) ListBuckets(ctx context.Context, addr string) ([]metadata.Bucket, error) {
	var out []metadata.Bucket
	if err := c.call(ctx, addr, "list buckets", http.MethodGet, PathBuckets, nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Stats returns the node's counts and disk usage.
func (c *Client) Stats(ctx context.Context, addr string) (Stats, error) {
	var st Stats
	err := c.call(ctx, addr, "stats", http.MethodGet, PathStats, nil, nil, &st)
	return st, err
}

// call does a request and decodes a JSON reply into out (unless nil).
func (c *Client) call(ctx context.Context, addr, op, method, path string, q url.Values, body io.Reader, out any) error {
	resp, err := c.do(ctx, addr, op, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("decode reply: %w", err)}
	}
	// NB: the decoder stops after the value, before the encoder's newline
	// and the end of a chunked body; a body closed before its end takes
	// its connection down with it instead of back to the idle pool.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return nil
}

// send builds and sends one request to a shard server (signed by the
// client's transport): extra headers h, and a Content-Type when ct is set.
// Transport errors come back as *NodeError; the caller reads the status.
func (c *Client) send(ctx context.Context, addr, op, method, path string, q url.Values, h http.Header, ct string, body io.Reader) (*http.Response, error) {
	u := url.URL{Scheme: "http", Host: addr, Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, &NodeError{Addr: addr, Op: op, Err: err}
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for try := 1; ; try++ {
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return nil, &NodeError{Addr: addr, Op: op, Err: err}
		}
		if !retryable(resp, req) || try == busyTries {
			return resp, nil
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err := pause.For(ctx, busyBackoff(try)); err != nil {
			return nil, &NodeError{Addr: addr, Op: op, Err: err}
		}
		if req, err = rewind(req); err != nil {
			return nil, &NodeError{Addr: addr, Op: op, Err: err}
		}
	}
}

// A server whose body budget is spent refuses a request with 503 and
// Retry-After before its handler runs. The client sends it again up to
// busyTries times in all, after busyBackoff, so a burst (a repair sending
// manifest batches to one server from every peer) queues instead of
// failing.
const busyTries = 8

// busyBackoff is the wait before try+1: 50 ms doubling up to 1 s, with
// jitter so refused senders do not return together.
func busyBackoff(try int) time.Duration {
	d := min(50*time.Millisecond<<(try-1), time.Second)
	return d/2 + rand.N(d/2)
}

// retryable reports whether resp refuses req in a way that allows sending
// it again: a 503 with Retry-After, and a body that can be read again.
func retryable(resp *http.Response, req *http.Request) bool {
	return resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(HeaderRetryAfter) != "" &&
		(req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
}

// rewind returns req ready to be sent again, with a fresh copy of its body.
func rewind(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	}
	return r, nil
}

// do sends a request and returns a 2xx response; any other outcome is a
// *NodeError.
func (c *Client) do(ctx context.Context, addr, op, method, path string, q url.Values, body io.Reader) (*http.Response, error) {
	ct := ""
	if body != nil {
		ct = "application/json"
		if method == http.MethodPut {
			ct = "application/octet-stream"
		}
	}
	resp, err := c.send(ctx, addr, op, method, path, q, nil, ct, body)
	if err != nil || resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, err
	}
	defer resp.Body.Close()
	re := &RemoteError{Status: resp.StatusCode, Code: resp.Header.Get(HeaderCode)}
	var eb ErrorBody
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &eb) == nil && eb.Code != "" {
		re.Code, re.Message = eb.Code, eb.Message
	} else {
		re.Message = string(bytes.TrimSpace(raw))
	}
	return nil, &NodeError{Addr: addr, Op: op, Err: re}
}
