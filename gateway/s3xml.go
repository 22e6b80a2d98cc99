package gateway

import (
	"encoding/xml"
	"io"
	"time"
)

// S3's XML bodies. Responses carry the S3 namespace on the root element,
// as AWS sends them; request types are matched by local name only, since
// clients differ on whether they send the namespace.
//
// Names follow the XML root element where that name was free in this
// package; ListAllMyBucketsResult, ListBucketResult and LocationConstraint
// use the AWS SDK's output names (ListBucketsOutput, ListObjectsV2Output,
// ListObjectsV1Output, LocationConstraintOutput) instead.

// S3Namespace is the namespace of every S3 response document.
const S3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/"

// maxRequestXML bounds request bodies parsed by DecodeXML. The largest
// legitimate one, a DeleteObjects of 1000 keys of 1 KiB, fits well inside.
const maxRequestXML = 2 << 20

// Timestamp is a time written the way S3 writes times in XML:
// 2006-01-02T15:04:05.000Z, always UTC with milliseconds.
type Timestamp time.Time

const timestampLayout = "2006-01-02T15:04:05.000Z"

// MarshalText implements encoding.TextMarshaler.
func (t Timestamp) MarshalText() ([]byte, error) {
	return []byte(time.Time(t).UTC().Format(timestampLayout)), nil
}

// UnmarshalText accepts S3's form and any RFC 3339 time.
func (t *Timestamp) UnmarshalText(b []byte) error {
	v, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return err
	}
	*t = Timestamp(v)
	return nil
}

// Time returns t as a time.Time.
func (t Timestamp) Time() time.Time { return time.Time(t) }

// EncodeXML marshals v as an S3 response body, XML declaration included.
// The types here cannot fail to marshal; a failure would be a programming
// error in a new type, so it panics rather than send a half document.
func EncodeXML(v any) []byte {
	if a, ok := v.(xmlAppender); ok {
		return a.appendXML(append(make([]byte, 0, 4096), xml.Header...))
	}
	b, err := xml.Marshal(v)
	if err != nil {
		panic("gateway: marshalling S3 XML: " + err.Error())
	}
	return append([]byte(xml.Header), b...)
}

// DecodeXML parses a request body into v, reading at most 2 MiB (handlers
// read bodies with Gateway.xmlBody, which also checks digests). Any failure
// (bad XML, wrong root element, too large) is ErrMalformedXML, which is what
// S3 answers; an empty body is ErrMissingRequestBodyError.
func DecodeXML(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, maxRequestXML+1))
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return ErrMissingRequestBodyError.With("")
	}
	if len(b) > maxRequestXML {
		return ErrMalformedXML.With("The XML you provided was larger than the maximum allowed size.")
	}
	if err := xml.Unmarshal(b, v); err != nil {
		return ErrMalformedXML.With("")
	}
	return nil
}

// CanonicalUser is S3's Owner / Initiator element.
type CanonicalUser struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName,omitempty"`
}

// ---- Buckets ----

// ListBucketsOutput is the ListBuckets response (ListAllMyBucketsResult).
type ListBucketsOutput struct {
	XMLName xml.Name       `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListAllMyBucketsResult"`
	Owner   *CanonicalUser `xml:"Owner,omitempty"`
	Buckets BucketList     `xml:"Buckets"` // always present, <Buckets/> when empty, as S3 sends it
	// ContinuationToken and Prefix appear only on paginated ListBuckets.
	ContinuationToken string `xml:"ContinuationToken,omitempty"`
	Prefix            string `xml:"Prefix,omitempty"`
}

// BucketList wraps the Bucket elements.
type BucketList struct {
	Bucket []BucketEntry `xml:"Bucket"`
}

// BucketEntry is one Bucket of ListBucketsOutput.
type BucketEntry struct {
	Name         string    `xml:"Name"`
	CreationDate Timestamp `xml:"CreationDate"`
	BucketRegion string    `xml:"BucketRegion,omitempty"`
}

// CreateBucketConfiguration is the optional CreateBucket request body.
type CreateBucketConfiguration struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string   `xml:"LocationConstraint"`
}

// LocationConstraintOutput is the GetBucketLocation response. S3 answers an
// empty constraint for us-east-1.
type LocationConstraintOutput struct {
	XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LocationConstraint"`
	Location string   `xml:",chardata"`
}

// ---- Listing ----

// ObjectEntry is one Contents element of a listing.
type ObjectEntry struct {
	Key               string         `xml:"Key"`
	LastModified      Timestamp      `xml:"LastModified"`
	ETag              string         `xml:"ETag"` // quoted, as in the ETag header
	ChecksumAlgorithm []string       `xml:"ChecksumAlgorithm,omitempty"`
	Size              int64          `xml:"Size"`
	StorageClass      string         `xml:"StorageClass"`
	Owner             *CanonicalUser `xml:"Owner,omitempty"`
}

// PrefixEntry is one CommonPrefixes element of a listing.
type PrefixEntry struct {
	Prefix string `xml:"Prefix"`
}

// ListObjectsV2Output is the ListObjectsV2 response (ListBucketResult).
// With encoding-type=url, the caller URL-encodes Key, Prefix, Delimiter,
// StartAfter and the CommonPrefixes before filling them in.
type ListObjectsV2Output struct {
	XMLName               xml.Name      `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string        `xml:"Name"`
	Prefix                string        `xml:"Prefix"`
	Delimiter             string        `xml:"Delimiter,omitempty"`
	MaxKeys               int           `xml:"MaxKeys"`
	KeyCount              int           `xml:"KeyCount"`
	IsTruncated           bool          `xml:"IsTruncated"`
	EncodingType          string        `xml:"EncodingType,omitempty"`
	ContinuationToken     string        `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string        `xml:"NextContinuationToken,omitempty"`
	StartAfter            string        `xml:"StartAfter,omitempty"`
	Contents              []ObjectEntry `xml:"Contents"`
	CommonPrefixes        []PrefixEntry `xml:"CommonPrefixes"`
}

// ListObjectsV1Output is the ListObjects (v1) response (ListBucketResult).
// NextMarker is only sent when a delimiter was given and the listing is
// truncated; without one, clients continue from the last Key.
type ListObjectsV1Output struct {
	XMLName        xml.Name      `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name           string        `xml:"Name"`
	Prefix         string        `xml:"Prefix"`
	Marker         string        `xml:"Marker"`
	NextMarker     string        `xml:"NextMarker,omitempty"`
	Delimiter      string        `xml:"Delimiter,omitempty"`
	MaxKeys        int           `xml:"MaxKeys"`
	IsTruncated    bool          `xml:"IsTruncated"`
	EncodingType   string        `xml:"EncodingType,omitempty"`
	Contents       []ObjectEntry `xml:"Contents"`
	CommonPrefixes []PrefixEntry `xml:"CommonPrefixes"`
}

// ---- DeleteObjects ----

// MaxDeleteObjects is the most keys one DeleteObjects request may name.
const MaxDeleteObjects = 1000

// DeleteObjectsRequest is the DeleteObjects request body (<Delete>).
type DeleteObjectsRequest struct {
	XMLName xml.Name           `xml:"Delete"`
	Quiet   bool               `xml:"Quiet"`
	Objects []ObjectIdentifier `xml:"Object"`
}

// ObjectIdentifier names one object to delete.
type ObjectIdentifier struct {
	Key              string `xml:"Key"`
	VersionID        string `xml:"VersionId,omitempty"`
	ETag             string `xml:"ETag,omitempty"`
	LastModifiedTime string `xml:"LastModifiedTime,omitempty"`
	Size             int64  `xml:"Size,omitempty"`
}

// Validate applies S3's limits: 1 to 1000 objects, each with a key.
func (d *DeleteObjectsRequest) Validate() error {
	if len(d.Objects) == 0 || len(d.Objects) > MaxDeleteObjects {
		return ErrMalformedXML.With("")
	}
	for _, o := range d.Objects {
		if o.Key == "" {
			return ErrMalformedXML.With("")
		}
	}
	return nil
}

// DeleteResult is the DeleteObjects response. In quiet mode only Errors
// are listed.
type DeleteResult struct {
	XMLName xml.Name        `xml:"http://s3.amazonaws.com/doc/2006-03-01/ DeleteResult"`
	Deleted []DeletedObject `xml:"Deleted"`
	Errors  []DeleteError   `xml:"Error"`
}

// DeletedObject reports one deleted key.
type DeletedObject struct {
	Key                   string `xml:"Key"`
	VersionID             string `xml:"VersionId,omitempty"`
	DeleteMarker          bool   `xml:"DeleteMarker,omitempty"`
	DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
}

// DeleteError reports one key that could not be deleted.
type DeleteError struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

// ---- Multipart uploads ----

// InitiateMultipartUploadResult is the CreateMultipartUpload response.
type InitiateMultipartUploadResult struct {
	XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ InitiateMultipartUploadResult"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

// Checksums are the optional x-amz-checksum-* values S3 echoes in XML.
// Embedded in part and result types.
type Checksums struct {
	ChecksumCRC32     string `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string `xml:"ChecksumSHA256,omitempty"`
}

// CompleteMultipartUpload is the CompleteMultipartUpload request body.
type CompleteMultipartUpload struct {
	XMLName xml.Name       `xml:"CompleteMultipartUpload"`
	Parts   []CompletePart `xml:"Part"`
}

// CompletePart names one uploaded part by number and ETag.
type CompletePart struct {
	PartNumber int    `xml:"PartNumber"`
	ETag       string `xml:"ETag"`
	Checksums
}

// MaxPartNumber is the highest part number S3 allows.
const MaxPartNumber = 10000

// Validate applies S3's rules to the part list: at least one part, numbers
// in 1..10000 (InvalidArgument) and strictly ascending (InvalidPartOrder).
// Whether each part exists and its ETag matches (InvalidPart) is the
// caller's check.
func (c *CompleteMultipartUpload) Validate() error {
	if len(c.Parts) == 0 {
		return ErrMalformedXML.With("")
	}
	prev := 0
	for _, p := range c.Parts {
		if p.PartNumber < 1 || p.PartNumber > MaxPartNumber {
			return ErrInvalidArgument.Withf("Part number must be an integer between 1 and %d, inclusive", MaxPartNumber)
		}
		if p.PartNumber <= prev {
			return ErrInvalidPartOrder.With("")
		}
		prev = p.PartNumber
	}
	return nil
}

// CompleteMultipartUploadResult is the CompleteMultipartUpload response.
// Note that S3 may send 200 and then an Error document in the body if the
// completion fails late; clients handle that.
type CompleteMultipartUploadResult struct {
	XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUploadResult"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
	Checksums
	ChecksumType string `xml:"ChecksumType,omitempty"`
}

// ListPartsResult is the ListParts response.
type ListPartsResult struct {
	XMLName              xml.Name       `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListPartsResult"`
	Bucket               string         `xml:"Bucket"`
	Key                  string         `xml:"Key"`
	UploadID             string         `xml:"UploadId"`
	Initiator            *CanonicalUser `xml:"Initiator,omitempty"`
	Owner                *CanonicalUser `xml:"Owner,omitempty"`
	StorageClass         string         `xml:"StorageClass"`
	PartNumberMarker     int            `xml:"PartNumberMarker"`
	NextPartNumberMarker int            `xml:"NextPartNumberMarker"`
	MaxParts             int            `xml:"MaxParts"`
	IsTruncated          bool           `xml:"IsTruncated"`
	ChecksumAlgorithm    string         `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType         string         `xml:"ChecksumType,omitempty"`
	Parts                []PartEntry    `xml:"Part"`
}

// PartEntry is one Part of ListPartsResult.
type PartEntry struct {
	PartNumber   int       `xml:"PartNumber"`
	LastModified Timestamp `xml:"LastModified"`
	ETag         string    `xml:"ETag"`
	Size         int64     `xml:"Size"`
	Checksums
}

// ListMultipartUploadsResult is the ListMultipartUploads response.
type ListMultipartUploadsResult struct {
	XMLName            xml.Name      `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListMultipartUploadsResult"`
	Bucket             string        `xml:"Bucket"`
	KeyMarker          string        `xml:"KeyMarker"`
	UploadIDMarker     string        `xml:"UploadIdMarker"`
	NextKeyMarker      string        `xml:"NextKeyMarker"`
	NextUploadIDMarker string        `xml:"NextUploadIdMarker"`
	Delimiter          string        `xml:"Delimiter,omitempty"`
	Prefix             string        `xml:"Prefix"`
	EncodingType       string        `xml:"EncodingType,omitempty"`
	MaxUploads         int           `xml:"MaxUploads"`
	IsTruncated        bool          `xml:"IsTruncated"`
	Uploads            []UploadEntry `xml:"Upload"`
	CommonPrefixes     []PrefixEntry `xml:"CommonPrefixes"`
}

// UploadEntry is one Upload of ListMultipartUploadsResult.
type UploadEntry struct {
	Key               string         `xml:"Key"`
	UploadID          string         `xml:"UploadId"`
	Initiator         *CanonicalUser `xml:"Initiator,omitempty"`
	Owner             *CanonicalUser `xml:"Owner,omitempty"`
	StorageClass      string         `xml:"StorageClass"`
	Initiated         Timestamp      `xml:"Initiated"`
	ChecksumAlgorithm string         `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType      string         `xml:"ChecksumType,omitempty"`
}

// ---- Copy ----

// CopyObjectResult is the CopyObject response.
type CopyObjectResult struct {
	XMLName      xml.Name  `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyObjectResult"`
	ETag         string    `xml:"ETag"`
	LastModified Timestamp `xml:"LastModified"`
	Checksums
	ChecksumType string `xml:"ChecksumType,omitempty"`
}

// CopyPartResult is the UploadPartCopy response.
type CopyPartResult struct {
	XMLName      xml.Name  `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyPartResult"`
	ETag         string    `xml:"ETag"`
	LastModified Timestamp `xml:"LastModified"`
	Checksums
}

// ---- Versions ----

// ListVersionsResult is the ListObjectVersions response. regen keeps one
// version per key, so every object is listed once, as its null version,
// latest. With encoding-type=url the caller encodes KeyMarker,
// NextKeyMarker, Prefix, Delimiter, Key and the CommonPrefixes.
type ListVersionsResult struct {
	XMLName             xml.Name       `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListVersionsResult"`
	Name                string         `xml:"Name"`
	Prefix              string         `xml:"Prefix"`
	KeyMarker           string         `xml:"KeyMarker"`
	VersionIDMarker     string         `xml:"VersionIdMarker"`
	NextKeyMarker       string         `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string         `xml:"NextVersionIdMarker,omitempty"`
	Delimiter           string         `xml:"Delimiter,omitempty"`
	MaxKeys             int            `xml:"MaxKeys"`
	IsTruncated         bool           `xml:"IsTruncated"`
	EncodingType        string         `xml:"EncodingType,omitempty"`
	Versions            []VersionEntry `xml:"Version"`
	CommonPrefixes      []PrefixEntry  `xml:"CommonPrefixes"`
}

// VersionEntry is one Version of ListVersionsResult, or a DeleteMarker
// (Marker): S3 interleaves the two in key order, so they share one slice.
// A marker has no ETag, Size or StorageClass.
type VersionEntry struct {
	Key          string         `xml:"Key"`
	VersionID    string         `xml:"VersionId"`
	IsLatest     bool           `xml:"IsLatest"`
	LastModified Timestamp      `xml:"LastModified"`
	ETag         string         `xml:"ETag,omitempty"`
	Size         *int64         `xml:"Size,omitempty"`
	StorageClass string         `xml:"StorageClass,omitempty"`
	Owner        *CanonicalUser `xml:"Owner,omitempty"`

	marker bool
}

// Marker makes e a DeleteMarker entry.
func (e VersionEntry) Marker() VersionEntry {
	e.marker = true
	e.ETag, e.Size, e.StorageClass = "", nil, ""
	return e
}

// MarshalXML names a marker's element DeleteMarker.
func (e VersionEntry) MarshalXML(enc *xml.Encoder, start xml.StartElement) error {
	if e.marker {
		start.Name.Local = "DeleteMarker"
	}
	// NB: a type without the method, or this would recurse; and without
	// an XMLName field, which would make encoding/xml add xmlns="".
	type plain VersionEntry
	return enc.EncodeElement(plain(e), start)
}

// ---- GetObjectAttributes ----

// GetObjectAttributesResponse is the GetObjectAttributes response: only
// the attributes asked for in x-amz-object-attributes are filled in.
type GetObjectAttributesResponse struct {
	XMLName      xml.Name               `xml:"http://s3.amazonaws.com/doc/2006-03-01/ GetObjectAttributesResponse"`
	ETag         string                 `xml:"ETag,omitempty"` // unquoted, unlike the header
	Checksum     *AttributesChecksum    `xml:"Checksum,omitempty"`
	ObjectParts  *AttributesObjectParts `xml:"ObjectParts,omitempty"`
	StorageClass string                 `xml:"StorageClass,omitempty"`
	ObjectSize   *int64                 `xml:"ObjectSize,omitempty"`
}

// AttributesChecksum is the Checksum of GetObjectAttributesResponse.
type AttributesChecksum struct {
	Checksums
	ChecksumType string `xml:"ChecksumType,omitempty"`
}

// AttributesObjectParts is the ObjectParts of GetObjectAttributesResponse.
type AttributesObjectParts struct {
	PartsCount           int              `xml:"PartsCount"`
	PartNumberMarker     int              `xml:"PartNumberMarker"`
	NextPartNumberMarker int              `xml:"NextPartNumberMarker"`
	MaxParts             int              `xml:"MaxParts"`
	IsTruncated          bool             `xml:"IsTruncated"`
	Parts                []AttributesPart `xml:"Part"`
}

// AttributesPart is one Part of AttributesObjectParts.
type AttributesPart struct {
	PartNumber int   `xml:"PartNumber"`
	Size       int64 `xml:"Size"`
	Checksums
}

// ---- Ownership controls ----

// OwnershipControls is the PutBucketOwnershipControls request and the
// GetBucketOwnershipControls response.
type OwnershipControls struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ OwnershipControls"`
	Rules   []struct {
		ObjectOwnership string `xml:"ObjectOwnership"`
	} `xml:"Rule"`
}
