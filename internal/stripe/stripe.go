package stripe

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// Shards is what this package needs from the shard servers: streaming put
// and ranged get of one shard file. *shardrpc.Client implements it.
type Shards interface {
	// PutShard streams body into shard idx of fileID on addr. Only a nil
	// error means the shard is durable.
	PutShard(ctx context.Context, addr, fileID string, idx int, body io.Reader) (shardrpc.ShardInfo, error)
	// GetShard streams length bytes (-1: to the end) of the shard's data
	// from off, verified against its checksums.
	GetShard(ctx context.Context, addr, fileID string, idx int, off, length int64) (io.ReadCloser, error)
}

// Target is the server of one shard. An empty Addr marks a server that is
// not reachable now; its shard is treated as missing.
type Target struct {
	Node string
	Addr string
}

// ShardError says which shard failed and why.
type ShardError struct {
	Index int
	Node  string
	Err   error
}

// Error describes the failure.
func (e *ShardError) Error() string {
	return fmt.Sprintf("shard %d on node %s: %v", e.Index, e.Node, e.Err)
}

// Unwrap returns the underlying error, for errors.Is and errors.As.
func (e *ShardError) Unwrap() error { return e.Err }

// ErrQuorum is matched (errors.Is) by every QuorumError.
var ErrQuorum = errors.New("stripe: not enough shards")

// QuorumError reports a write or read that could not reach enough shards.
type QuorumError struct {
	Op   string // "write" or "read"
	Want int
	Got  int
	Errs []error // the shard errors, *ShardError each
}

// Error describes the failure.
func (e *QuorumError) Error() string {
	msg := fmt.Sprintf("stripe %s: %d of %d required shards", e.Op, e.Got, e.Want)
	if len(e.Errs) > 0 {
		msg += ": " + errors.Join(e.Errs...).Error()
	}
	return msg
}

// Is makes every QuorumError match ErrQuorum.
func (e *QuorumError) Is(target error) bool { return target == ErrQuorum }

// Unwrap returns the shard errors, for errors.Is and errors.As.
func (e *QuorumError) Unwrap() []error { return e.Errs }
