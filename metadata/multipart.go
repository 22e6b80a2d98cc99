package metadata

import (
	"errors"
	"fmt"
	"time"
)

// Upload is the record of a multipart upload in progress. It is written
// once, at creation, to the placement servers of the key; its parts are
// separate records so that uploading a part never rewrites it.
type Upload struct {
	Bucket    string    `json:"bucket"`
	Key       string    `json:"key"`
	ID        string    `json:"id"`
	Initiated time.Time `json:"initiated"`
	Owner     string    `json:"owner,omitempty"` // access key of the initiator

	// What the completed object will carry.
	ContentType  string            `json:"content_type,omitempty"`
	UserMeta     map[string]string `json:"user_meta,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	StorageClass string            `json:"storage_class,omitempty"`
	Checksum     string            `json:"checksum,omitempty"` // x-amz-checksum-algorithm, if any
	ACL          string            `json:"acl,omitempty"`      // canned ACL
	Tags         map[string]string `json:"tags,omitempty"`     // x-amz-tagging
	Lock         *Lock             `json:"lock,omitempty"`     // x-amz-object-lock-* or the bucket's default
	// SSE is the completed object's encryption (its Overhead unused): set
	// when every part is encrypted, and for SSE-C the key every part must
	// be sent with.
	SSE *Encryption `json:"sse,omitempty"`

	// Geometry every part is written with: all parts of one object share
	// code, chunk size and placement, so the manifest can list them.
	Code        string   `json:"code"`
	CodecFormat int      `json:"codec_format"`
	ChunkSize   int64    `json:"chunk_size"`
	Placement   []string `json:"placement"`
}

// UploadPart is one uploaded part of a multipart upload. Re-uploading a
// part number writes a newer Version; the newest wins, like manifests.
type UploadPart struct {
	UploadID string    `json:"upload_id"`
	Number   int       `json:"number"`
	Version  Version   `json:"version"`
	ID       string    `json:"id"` // shard file ID of the part's stripe group
	Size     int64     `json:"size"`
	ETag     string    `json:"etag"` // hex MD5 of the part's data
	Modified time.Time `json:"modified"`
	ShardCRC []uint32  `json:"shard_crc"`
	// Checksums holds x-amz-checksum-* values verified at upload, by
	// algorithm name (e.g. "CRC32C"), base64 as S3 sends them.
	Checksums map[string]string `json:"checksums,omitempty"`
	// SealedKey is the part's sealed data key when the upload is
	// encrypted; Size is then the stored (sealed) size.
	SealedKey []byte `json:"sealed_key,omitempty"`
}

// MaxPartNumber is S3's highest part number.
const MaxPartNumber = 10000

// ErrInvalidUpload is returned for upload or part records that fail
// validation.
var ErrInvalidUpload = errors.New("metadata: invalid upload")

// Validate checks an upload record.
func (u *Upload) Validate() error {
	if u.Bucket == "" || u.Key == "" || u.ID == "" || u.Code == "" || u.ChunkSize <= 0 || len(u.Placement) == 0 {
		return fmt.Errorf("%w: %s/%s %q needs bucket, key, ID, code, chunk size and placement", ErrInvalidUpload, u.Bucket, u.Key, u.ID)
	}
	return nil
}

// Validate checks a part record.
func (p *UploadPart) Validate() error {
	switch {
	case p.UploadID == "":
		return fmt.Errorf("%w: part without upload ID", ErrInvalidUpload)
	case p.Number < 1 || p.Number > MaxPartNumber:
		return fmt.Errorf("%w: part number %d outside 1..%d", ErrInvalidUpload, p.Number, MaxPartNumber)
	case p.ID == "" || p.Size < 0 || p.Version.IsZero():
		return fmt.Errorf("%w: part %d needs ID, size and version", ErrInvalidUpload, p.Number)
	}
	return nil
}

// UploadQuery selects uploads of one bucket in (key, upload ID) order.
type UploadQuery struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix,omitempty"`
	// KeyMarker and IDMarker: only uploads after (KeyMarker, IDMarker);
	// with an empty IDMarker, only keys after KeyMarker.
	KeyMarker string `json:"key_marker,omitempty"`
	IDMarker  string `json:"id_marker,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}
