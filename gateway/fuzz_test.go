package gateway

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets here cover what the gateway parses from a client before
// anything is authorized to go wrong: every XML request body, Range and
// x-amz-copy-source-range, keys, bucket names and paths, body framing.
// They are plain `go test -fuzz` targets; their seeds run with go test.

// clientError checks that err, if any, is an S3 error a client caused
// (4xx, or 501 NotImplemented for what regen does not do), never an
// internal one: bad input must not look like a bug.
func clientError(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: error %T %v is not an S3 error", what, err, err)
	}
	if (ae.HTTPStatus < 400 || ae.HTTPStatus >= 500) && ae.Code != "NotImplemented" {
		t.Fatalf("%s: %s (%d) for a client's input", what, ae.Code, ae.HTTPStatus)
	}
}

// FuzzXMLBodies parses arbitrary bytes as each XML request body and runs
// the checks its handler runs after parsing.
func FuzzXMLBodies(f *testing.F) {
	for _, s := range []string{
		`<Delete><Quiet>true</Quiet><Object><Key>a</Key></Object><Object><Key>b b</Key><VersionId>null</VersionId></Object></Delete>`,
		`<Delete><Object><Key>keep&#0;</Key></Object></Delete>`,
		`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"e"</ETag></Part><Part><PartNumber>2</PartNumber><ETag>x</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part></CompleteMultipartUpload>`,
		`<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>`,
		`<AccessControlPolicy><AccessControlList><Grant><Grantee><URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee><Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>`,
		`<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>*</AllowedHeader><MaxAgeSeconds>3000</MaxAgeSeconds></CORSRule></CORSConfiguration>`,
		`<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>`,
		`<OwnershipControls><Rule><ObjectOwnership>BucketOwnerEnforced</ObjectOwnership></Rule></OwnershipControls>`,
		`<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><Delete><Object><Key>&a;</Key></Object></Delete>`,
		``,
	} {
		for which := range uint8(7) {
			f.Add([]byte(s), which)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		switch which % 7 {
		case 0:
			var d DeleteObjectsRequest
			if err := parseXML(b, &d); err != nil {
				clientError(t, "DeleteObjects", err)
				return
			}
			clientError(t, "DeleteObjects validate", d.Validate())
			for _, o := range d.Objects {
				if !utf8.ValidString(o.Key) {
					t.Fatalf("XML gave a key of invalid UTF-8: %q", o.Key)
				}
			}
		case 1:
			var c CompleteMultipartUpload
			if err := parseXML(b, &c); err != nil {
				clientError(t, "CompleteMultipartUpload", err)
				return
			}
			clientError(t, "CompleteMultipartUpload validate", c.Validate())
		case 2:
			var c CreateBucketConfiguration
			clientError(t, "CreateBucketConfiguration", parseXML(b, &c))
		case 3:
			var in aclInput
			if err := parseXML(b, &in); err != nil {
				clientError(t, "ACL", err)
				return
			}
			_, err := in.cannedOf()
			clientError(t, "ACL grants", err)
		case 4:
			var in corsInput
			if err := parseXML(b, &in); err != nil {
				clientError(t, "CORS", err)
				return
			}
			_, err := corsRules(&in)
			clientError(t, "CORS rules", err)
		case 5:
			var in taggingInput
			if err := parseXML(b, &in); err != nil {
				clientError(t, "Tagging", err)
				return
			}
			_, err := tagsFromXML(&in, maxObjectTags, "Object")
			clientError(t, "Tagging tags", err)
		case 6:
			var in ownershipControlsInput
			clientError(t, "OwnershipControls", parseXML(b, &in))
		}
	})
}

// FuzzRange: a resolved range always lies inside the object.
func FuzzRange(f *testing.F) {
	for _, h := range []string{"bytes=0-", "bytes=5-9", "bytes=-3", "bytes=-0", "bytes=9-5", "bytes=0-0,5-6", "bytes= 1 - 2 ", "bytes=99999999999999999999-", "bytes=-9223372036854775808", "items=0-1", ""} {
		f.Add(h, int64(10))
		f.Add(h, int64(0))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		for name, parse := range map[string]func(string, int64) (*byteRange, error){"Range": parseRange, "x-amz-copy-source-range": parseCopyRange} {
			r, err := parse(h, size)
			clientError(t, name, err)
			if r == nil {
				continue
			}
			if r.start < 0 || r.length < 1 || r.start > size-r.length {
				t.Fatalf("%s %q on %d bytes: start %d length %d outside the object", name, h, size, r.start, r.length)
			}
		}
	})
}

// FuzzKeys: a key checkKey accepts is stored exactly (JSON manifests) and
// listed exactly (XML), so no two keys can become one and no key can be
// renamed on the way; bucket names and paths never panic.
func FuzzKeys(f *testing.F) {
	for _, k := range []string{"a", "dir/a b+c", "x\xff", "x\xfe", "nul\x00", "ctl\x01", "tab\t\r\n", "é", strings.Repeat("é", 512), "a" + strings.Repeat("é", 512), "\uFFFE", "\U0010FFFF"} {
		f.Add(k, "/bucket/"+k)
	}
	f.Add("", "/%zz/%")
	f.Fuzz(func(t *testing.T, key, rawPath string) {
		if err := checkKey(key); err != nil {
			clientError(t, "checkKey", err)
		} else {
			if len(key) > maxKeyLen || !utf8.ValidString(key) || strings.IndexFunc(key, xmlIllegal) >= 0 {
				t.Fatalf("checkKey accepted %q", key)
			}
			j, _ := json.Marshal(key)
			var back string
			if json.Unmarshal(j, &back) != nil || back != key {
				t.Fatalf("key %q does not survive a JSON manifest: %q", key, back)
			}
			x, err := xml.Marshal(listedKey{K: key})
			var xb listedKey
			if err != nil || xml.Unmarshal(x, &xb) != nil || xb.K != key {
				t.Fatalf("key %q does not survive an XML listing: %q (%v)", key, xb.K, err)
			}
		}
		if validBucketName(key) {
			if len(key) < 3 || len(key) > 63 || strings.Trim(key, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
				t.Fatalf("validBucketName accepted %q", key)
			}
		}
		if b, k, err := splitPath(rawPath); err != nil {
			clientError(t, "splitPath", err)
		} else if strings.Contains(b, "/") {
			t.Fatalf("splitPath(%q) gave bucket %q with a slash (key %q)", rawPath, b, k)
		}
	})
}

// listedKey is a key as a listing carries it.
type listedKey struct {
	XMLName xml.Name `xml:"Contents"`
	K       string   `xml:"Key"`
}

// FuzzFramingHeaders: the raw-header scan behind checkFraming never
// panics and finds every Content-Length line.
func FuzzFramingHeaders(f *testing.F) {
	f.Add([]byte("PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Add([]byte("content-length:1\nCONTENT-LENGTH : 2"))
	f.Add([]byte(":\r\n:\n\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		lengths, _ := framingHeaders(raw)
		want := 0
		for _, line := range strings.Split(string(raw), "\n") {
			name, _, ok := strings.Cut(line, ":")
			if ok && strings.EqualFold(strings.TrimSpace(name), "content-length") {
				want++
			}
		}
		if len(lengths) != want {
			t.Fatalf("framingHeaders found %d Content-Length lines in %q, want %d", len(lengths), raw, want)
		}
	})
}
