package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DialFunc dials a connection; see NewRepairHTTPClient.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// NewRepairHTTPClient returns an HTTP client for repair calls. Unlike
// NewHTTPClient it has no response-header timeout: a repair answers only
// when the whole stripe group is rebuilt, which takes as long as the data
// takes to move. Bound repairs with their ctx. A nil dial uses a plain
// dialer; shard servers pass their rate-limited one.
func NewRepairHTTPClient(dial DialFunc) *http.Client {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		// NB: small bufio buffers on purpose. Repair streams move in
		// slice-sized (64 KiB+) writes and reads; bufio passes a large
		// write or read straight through only when its buffer is empty,
		// so a 256 KiB buffer made every chunk one extra memmove (the
		// chunk header sits in the buffer, the slice is copied behind it).
		WriteBufferSize: 8 << 10,
		ReadBufferSize:  8 << 10,
	}}
}

// RepairPull asks addr to decode and store req.Targets (see PathRepairPull).
func (c *Client) RepairPull(ctx context.Context, addr string, req PullRequest) (RepairReport, error) {
	return c.repairCall(ctx, addr, "repair pull "+req.FileID, PathRepairPull, req)
}

// RepairCore asks the relayer addr to rebuild req.Lost (see PathRepairCore).
func (c *Client) RepairCore(ctx context.Context, addr string, req CoreRequest) (RepairReport, error) {
	return c.repairCall(ctx, addr, "repair core "+req.FileID, PathRepairCore, req)
}

// RepairCopy asks addr to copy a shard (see PathRepairCopy).
func (c *Client) RepairCopy(ctx context.Context, addr string, req CopyRequest) (RepairReport, error) {
	return c.repairCall(ctx, addr, "repair copy "+req.FileID, PathRepairCopy, req)
}

func (c *Client) repairCall(ctx context.Context, addr, op, path string, req any) (RepairReport, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return RepairReport{}, &NodeError{Addr: addr, Op: op, Err: err}
	}
	resp, err := c.doRepair(ctx, addr, op, http.MethodPost, path, nil, nil, bytes.NewReader(body))
	if err != nil {
		return RepairReport{}, err
	}
	return decodeReport(resp, addr, op)
}

// RepairPush sends the partial-slice stream body (nil for the first hop)
// to the PUSH hop addr described by req and returns the report of the
// rest of the chain.
func (c *Client) RepairPush(ctx context.Context, addr string, req PushRequest, body io.Reader) (RepairReport, error) {
	op := fmt.Sprintf("repair push %s hop %d", req.FileID, req.Pos)
	spec, err := EncodeSpec(req)
	if err != nil {
		return RepairReport{}, &NodeError{Addr: addr, Op: op, Err: err}
	}
	if body == nil {
		body = http.NoBody
	}
	resp, err := c.doRepair(ctx, addr, op, http.MethodPost, PathRepairPush, nil, http.Header{HeaderRepairSpec: {spec}}, body)
	if err != nil {
		return RepairReport{}, err
	}
	return decodeReport(resp, addr, op)
}

// RepairHelper opens the helper-encoding stream of addr (see
// PathRepairHelper). Like GetShard's reader, it fails rather than return a
// short or corrupt stream. The caller must Close it.
func (c *Client) RepairHelper(ctx context.Context, addr string, req HelperRequest) (io.ReadCloser, error) {
	op := fmt.Sprintf("repair helper %s.%d", req.FileID, req.Idx)
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &NodeError{Addr: addr, Op: op, Err: err}
	}
	resp, err := c.doRepair(ctx, addr, op, http.MethodPost, PathRepairHelper, nil, nil, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	want, perr := strconv.ParseInt(resp.Header.Get(HeaderLength), 10, 64)
	if perr != nil || want < 0 {
		resp.Body.Close()
		return nil, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("bad %s header %q", HeaderLength, resp.Header.Get(HeaderLength))}
	}
	return &shardReader{resp: resp, body: resp.Body, want: want, addr: addr, op: op}, nil
}

// StoreRebuilt stores body as rebuilt shard idx of fileID on addr. The
// server makes the shard visible only if its data has exactly size bytes
// and CRC-32C crc.
func (c *Client) StoreRebuilt(ctx context.Context, addr, fileID string, idx int, size int64, crc uint32, body io.Reader) (ShardInfo, error) {
	op := fmt.Sprintf("store rebuilt shard %s.%d", fileID, idx)
	if err := ValidateShardName(fileID, idx); err != nil {
		return ShardInfo{}, &NodeError{Addr: addr, Op: op, Err: err}
	}
	q := url.Values{ParamSize: {strconv.FormatInt(size, 10)}, ParamCRC: {strconv.FormatUint(uint64(crc), 10)}}
	resp, err := c.doRepair(ctx, addr, op, http.MethodPut, RepairStorePath(fileID, idx), q, nil, body)
	if err != nil {
		return ShardInfo{}, err
	}
	defer resp.Body.Close()
	var info ShardInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return ShardInfo{}, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("decode reply: %w", err)}
	}
	return info, nil
}

func decodeReport(resp *http.Response, addr, op string) (RepairReport, error) {
	defer resp.Body.Close()
	var rep RepairReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return RepairReport{}, &NodeError{Addr: addr, Op: op, Err: fmt.Errorf("decode reply: %w", err)}
	}
	return rep, nil
}

// doRepair is do for repair calls: extra headers, and a failed repair's
// blamed node preserved as a *RepairFailure.
func (c *Client) doRepair(ctx context.Context, addr, op, method, path string, q url.Values, h http.Header, body io.Reader) (*http.Response, error) {
	ct := "application/json"
	if method == http.MethodPut || path == PathRepairPush {
		ct = "application/octet-stream"
	}
	resp, err := c.send(ctx, addr, op, method, path, q, h, ct, body)
	if err != nil || resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb RepairErrorBody
	if json.Unmarshal(raw, &eb) == nil && eb.Code == CodeRepairFailed {
		return nil, &NodeError{Addr: addr, Op: op, Err: &RepairFailure{Node: eb.Node, Message: eb.Message}}
	}
	re := &RemoteError{Status: resp.StatusCode, Code: eb.Code, Message: eb.Message}
	if eb.Code == "" {
		re.Code, re.Message = resp.Header.Get(HeaderCode), string(bytes.TrimSpace(raw))
	}
	return nil, &NodeError{Addr: addr, Op: op, Err: re}
}
