package shardrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/regen-s3/regen/metadata"
)

// Paths. Shard paths are PathShards + "{fileID}/{idx}" (see ShardPath).
const (
	PathShards    = "/v1/shards/"
	PathManifests = "/v1/manifests"
	PathList      = "/v1/list"
	PathBuckets   = "/v1/buckets"
	PathStats     = "/v1/stats"
	// PathHealth and PathReady need no signature, so load balancers and
	// orchestrators can probe them.
	PathHealth = "/healthz"
	PathReady  = "/readyz"
)

// Headers and trailers.
const (
	// HeaderCode repeats an error response's code, for HEAD responses.
	HeaderCode = "X-Regen-Code"
	// HeaderRetryAfter on a 503 says the request was refused before its
	// handler ran (a server's body budget was spent), so sending it again
	// is safe; the Client does, a few times (Client.send).
	HeaderRetryAfter = "Retry-After"
	// HeaderLength is the number of data bytes a shard GET will stream.
	HeaderLength = "X-Regen-Length"
	// HeaderSize and HeaderCRC answer a shard HEAD: data size and the
	// CRC-32C (Castagnoli) of the whole shard data, decimal.
	HeaderSize = "X-Regen-Size"
	HeaderCRC  = "X-Regen-Crc32c"
	// TrailerError ends a shard GET that failed mid-stream; its value is
	// TrailerCorrupt for a checksum failure, anything else for I/O errors.
	TrailerError   = "X-Regen-Error"
	TrailerCorrupt = "corrupt"
	// HeaderBlockSize answers a framed shard GET (ParamFramed): the body
	// is the shard file's own blocks that hold the range, from block
	// offset/B, each block's data (B bytes, the shard's last block
	// shorter) followed by its CRC-32C, big-endian; HeaderSize gives the
	// shard's data size and HeaderLength the range's. A server that does
	// not know framing sends neither, and the body is the range's data.
	HeaderBlockSize = "X-Regen-Block-Size"
)

// Query parameters.
const (
	ParamOffset    = "offset"
	ParamLength    = "length" // -1 or absent: to the end
	ParamBucket    = "bucket"
	ParamKey       = "key"
	ParamPrefix    = "prefix"
	ParamDelimiter = "delimiter"
	ParamAfter     = "after"
	ParamLimit     = "limit"
	// ParamUnsure=1 asks a delimiter listing for its unsure common
	// prefixes too (metadata.ListQuery.Unsure); servers that do not know
	// it send none.
	ParamUnsure = "unsure"
	// ParamFramed=1 asks a shard GET for the file's blocks as stored,
	// each with its CRC (HeaderBlockSize), which the server sends from
	// the page cache to the socket (sendfile) and the client verifies.
	ParamFramed = "framed"
)

// Error codes carried in ErrorBody.Code and HeaderCode.
const (
	CodeNotFound     = "NotFound"
	CodeCorrupt      = "Corrupt"
	CodeUnauthorized = "Unauthorized"
	CodeBadRequest   = "BadRequest"
	CodeNoRoute      = "NoRoute"
	CodeInternal     = "Internal"
	// CodeUnavailable: the server cannot take the request now (a limit);
	// retry later.
	CodeUnavailable = "Unavailable"
	// CodeLocked: the request would remove or weaken what a version's
	// object lock keeps (metadata.ErrLocked).
	CodeLocked = "Locked"
)

// Sentinel errors. Client methods return them wrapped in *NodeError.
var (
	// ErrNotFound: the shard, manifest or bucket does not exist on that node.
	ErrNotFound = errors.New("shardrpc: not found")
	// ErrCorrupt: the shard data failed its checksum on the node.
	ErrCorrupt = errors.New("shardrpc: shard corrupt")
	// ErrUnauthorized: the node refused the request's signature (wrong
	// cluster secret, clock off by more than the window, or a replay).
	ErrUnauthorized = errors.New("shardrpc: unauthorized")
	// ErrBadRequest: the node rejected the request as malformed (bad shard
	// name, invalid manifest, range outside the shard, ...).
	ErrBadRequest = errors.New("shardrpc: bad request")
	// ErrLocked: the node refused to remove, roll back or weaken a
	// version its object lock keeps (retention in force, legal hold).
	ErrLocked = errors.New("shardrpc: version protected by object lock")
)

// Limits on shard names. Object keys never become file names: shard files
// are named by part ID and shard index only, and both are checked here.
const (
	MaxFileIDLen = 128
	MaxShardIdx  = 255
)

// ShardInfo describes a stored shard's data.
type ShardInfo struct {
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc32c"` // CRC-32C (Castagnoli) of the whole data
}

// PutManifestResponse answers POST PathManifests.
type PutManifestResponse struct {
	Stored  bool             `json:"stored"`
	Current metadata.Version `json:"current"`
	// Replaced is set when the stored manifest replaced a current one
	// (an overwrite or a delete): the server then runs a confirm job for
	// the key, which a gateway's commit notice (PathCommitted) settles
	// without asking the peers. A server that predates the field leaves it
	// false; its confirm job then asks, as it always could.
	Replaced bool `json:"replaced,omitempty"`
	// Held is set when the manifest's version is held there after the
	// call: stored as current, kept as a previous version (it is older
	// than the current one), or held already. The repair switch of a
	// noncurrent version counts its copies by it (PutVersion); a server
	// that predates the field leaves it false, so such a switch counts
	// it as not stored and never over-counts.
	Held bool `json:"held,omitempty"`
}

// PutBucketResponse answers POST PathBuckets.
type PutBucketResponse struct {
	Stored bool `json:"stored"`
}

// ListResponse answers GET PathList.
type ListResponse struct {
	Entries   []metadata.ListEntry `json:"entries"`
	Truncated bool                 `json:"truncated"`
}

// Stats answers GET PathStats.
type Stats struct {
	NodeID        string `json:"node_id"`
	Objects       int64  `json:"objects"`
	Tombstones    int64  `json:"tombstones"`
	Bytes         int64  `json:"bytes"`
	Shards        int64  `json:"shards"`
	DiskUsedBytes int64  `json:"disk_used_bytes"`
	DiskFreeBytes int64  `json:"disk_free_bytes"`

	// Inline counts inline objects placed on the node (see
	// metadata.Stats). Uploads counts open multipart uploads placed on
	// it: their parts are on it, and so will the completed object be.
	Inline  int64 `json:"inline"`
	Uploads int64 `json:"uploads"`
	// Previous, PreviousBytes and PreviousShards count the previous
	// versions the node keeps (metadata.Stats): a versioned bucket's
	// noncurrent versions and delete markers among them.
	Previous       int64 `json:"previous"`
	PreviousBytes  int64 `json:"previous_bytes"`
	PreviousShards int64 `json:"previous_shards"`
	// TombstoneJobs counts the tombstones queued on the node for
	// collection, TombstonesCollected those it removed since it started
	// (metadata.Stats), TombstoneChecksBlocked its checks that a server
	// which did not answer blocked since it started.
	TombstoneJobs          int64 `json:"tombstone_jobs"`
	TombstonesCollected    int64 `json:"tombstones_collected"`
	TombstoneChecksBlocked int64 `json:"tombstone_checks_blocked"`
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ValidateShardName checks that fileID and idx can name a shard file:
// fileID is 1..MaxFileIDLen characters of [A-Za-z0-9-] starting with a
// letter or digit, idx is in 0..MaxShardIdx. The error wraps ErrBadRequest.
func ValidateShardName(fileID string, idx int) error {
	if idx < 0 || idx > MaxShardIdx {
		return fmt.Errorf("%w: shard index %d out of range 0..%d", ErrBadRequest, idx, MaxShardIdx)
	}
	if len(fileID) == 0 || len(fileID) > MaxFileIDLen {
		return fmt.Errorf("%w: file ID must have 1..%d characters", ErrBadRequest, MaxFileIDLen)
	}
	for i := 0; i < len(fileID); i++ {
		c := fileID[i]
		alnum := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alnum && (c != '-' || i == 0) {
			return fmt.Errorf("%w: file ID %q: only letters, digits and inner '-'", ErrBadRequest, fileID)
		}
	}
	return nil
}

// ParseShardIdx parses a shard index path segment strictly (no sign, no
// leading zeros) and validates it with fileID.
func ParseShardIdx(fileID, s string) (int, error) {
	idx, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(idx) != s {
		return 0, fmt.Errorf("%w: bad shard index %q", ErrBadRequest, s)
	}
	return idx, ValidateShardName(fileID, idx)
}

// ShardPath is the URL path of shard idx of fileID.
func ShardPath(fileID string, idx int) string {
	return PathShards + fileID + "/" + strconv.Itoa(idx)
}

// WriteJSON writes v as a JSON response with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// NB: the status is already sent; an encoding error can only be a
	// broken connection, which the client sees as a failed request.
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError writes an error response: code in HeaderCode and ErrorBody.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set(HeaderCode, code)
	WriteJSON(w, status, ErrorBody{Code: code, Message: message})
}

// NodeError is the error of a client call: which node, which operation,
// and why. Err unwraps to a sentinel when the node said what went wrong.
type NodeError struct {
	Addr string // host:port of the shard server
	Op   string // e.g. "put shard f00d.3", "get manifest b/k"
	Err  error
}

// Error describes the failure.
func (e *NodeError) Error() string { return fmt.Sprintf("shardrpc: %s on %s: %v", e.Op, e.Addr, e.Err) }

// Unwrap returns the underlying error, for errors.Is and errors.As.
func (e *NodeError) Unwrap() error { return e.Err }

// RemoteError is an error response from a shard server. It unwraps to the
// sentinel of its code, if there is one.
type RemoteError struct {
	Status  int
	Code    string
	Message string
}

// Error describes the failure.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap returns the sentinel error of the response's code (ErrNotFound
// for NotFound, ...), nil for codes without one.
func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case CodeNotFound:
		return ErrNotFound
	case CodeCorrupt:
		return ErrCorrupt
	case CodeUnauthorized:
		return ErrUnauthorized
	case CodeBadRequest:
		return ErrBadRequest
	case CodeLeaseHeld:
		return ErrLeaseHeld
	case CodeLocked:
		return ErrLocked
	}
	return nil
}
