package gateway

import (
	"bytes"
	"encoding/xml"
	"math/rand/v2"
	"testing"
	"time"
)

// xmlStrings are names that need every kind of escaping xml.Marshal does.
var xmlStrings = []string{
	"", "plain/key.txt", "a&b", "<tag>", `"quoted"`, "it's", "tab\there", "line\nbreak", "cr\rx",
	"ünïcödé/名前", "bad\xffutf8", "ctl\x01char", "\x7f del", "emoji 🙂", "%2F encoded",
}

func randString(r *rand.Rand) string {
	s := xmlStrings[r.IntN(len(xmlStrings))]
	if r.IntN(3) == 0 {
		s += xmlStrings[r.IntN(len(xmlStrings))]
	}
	return s
}

func randEntries(r *rand.Rand) ([]ObjectEntry, []PrefixEntry) {
	var os []ObjectEntry
	for range r.IntN(4) {
		e := ObjectEntry{
			Key: randString(r), ETag: `"` + randString(r) + `"`, Size: r.Int64N(1 << 40), StorageClass: randString(r),
			LastModified: Timestamp(time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(time.FixedZone("x", 3600))),
		}
		if r.IntN(2) == 0 {
			e.Owner = &CanonicalUser{ID: randString(r), DisplayName: randString(r)}
		}
		for range r.IntN(3) {
			e.ChecksumAlgorithm = append(e.ChecksumAlgorithm, randString(r))
		}
		os = append(os, e)
	}
	var ps []PrefixEntry
	for range r.IntN(4) {
		ps = append(ps, PrefixEntry{Prefix: randString(r)})
	}
	return os, ps
}

// The hand-written listing documents are exactly what encoding/xml writes.
func TestListXMLMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	marshal := func(v any) []byte {
		b, err := xml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(xml.Header), b...)
	}
	for i := range 2000 {
		objs, prefixes := randEntries(r)
		v2 := ListObjectsV2Output{
			Name: randString(r), Prefix: randString(r), Delimiter: randString(r), MaxKeys: r.IntN(1001), KeyCount: r.IntN(1001),
			IsTruncated: r.IntN(2) == 0, EncodingType: randString(r), ContinuationToken: randString(r),
			NextContinuationToken: randString(r), StartAfter: randString(r), Contents: objs, CommonPrefixes: prefixes,
		}
		if got, want := EncodeXML(v2), marshal(v2); !bytes.Equal(got, want) {
			t.Fatalf("case %d, V2:\n got %s\nwant %s", i, got, want)
		}
		v1 := ListObjectsV1Output{
			Name: randString(r), Prefix: randString(r), Marker: randString(r), NextMarker: randString(r),
			Delimiter: randString(r), MaxKeys: r.IntN(1001), IsTruncated: r.IntN(2) == 0, EncodingType: randString(r),
			Contents: objs, CommonPrefixes: prefixes,
		}
		if got, want := EncodeXML(v1), marshal(v1); !bytes.Equal(got, want) {
			t.Fatalf("case %d, V1:\n got %s\nwant %s", i, got, want)
		}
	}
}

// BenchmarkListXML encodes a page of 1,000 keys.
func BenchmarkListXML(b *testing.B) {
	out := ListObjectsV2Output{Name: "bucket", Prefix: "meta/", MaxKeys: 1000, KeyCount: 1000, IsTruncated: true}
	for i := range 1000 {
		out.Contents = append(out.Contents, ObjectEntry{
			Key: "meta/p0001/o00000" + string(rune('0'+i%10)), LastModified: Timestamp(time.Unix(1.7e9, 0)),
			ETag: `"0123456789abcdef0123456789abcdef"`, Size: 1024, StorageClass: "STANDARD",
		})
	}
	for _, bc := range []struct {
		name string
		enc  func() []byte
	}{
		{"handwritten", func() []byte { return EncodeXML(out) }},
		{"encoding-xml", func() []byte { b, _ := xml.Marshal(out); return b }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.enc()
			}
		})
	}
}
