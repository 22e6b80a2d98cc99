package shardrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regen-s3/regen/metadata"
)

// listPage is a page with every kind of row: keys sharing prefixes, a
// common prefix (live and unsure), a tombstone, NUL and non-ASCII bytes, a zero time,
// previous versions (one of them a tombstone), a versioned key.
func listPage() []metadata.ListEntry {
	at := time.Unix(1764968400, 123456789).UTC()
	v := func(ts int64, w string) metadata.Version { return metadata.Version{TS: ts, Writer: w} }
	return []metadata.ListEntry{
		{Key: "a", Version: v(10, "gw-1"), Size: 1024, ETag: "e1", Modified: at, Code: "rs-6-3"},
		{Prefix: "a/"},
		{Key: "a\x00b", Version: v(11, "gw-1"), Deleted: true, Modified: at, Code: "rs-6-3"},
		{Key: "photos/2024/é.jpg", Version: v(12, "gw-2"), Size: 1 << 40, ETag: "e3", StorageClass: "REDUCED_REDUNDANCY", Modified: at, Code: "clay-6-3"},
		{Key: "photos/2024/éé.jpg", Version: v(13, "gw-2"), ETag: "e4", Code: "rs-6-3", VersionID: "v13", Previous: []metadata.ListEntry{
			{Key: "photos/2024/éé.jpg", Version: v(9, "gw-1"), Deleted: true, Modified: at, Code: "rs-6-3", VersionID: "v9"},
			{Key: "photos/2024/éé.jpg", Version: v(8, "gw-1"), Size: 3, ETag: "e0", Modified: at.Add(-time.Hour), Code: "rs-6-3"},
		}},
		{Prefix: "photos/2025/"},
		{Prefix: "tmp/", Deleted: true}, // unsure (metadata.ListQuery.Unsure)
		{Key: "z", Version: v(-1, ""), Size: -1},
	}
}

func TestListBinaryRoundTrip(t *testing.T) {
	for _, truncated := range []bool{false, true} {
		for _, page := range [][]metadata.ListEntry{nil, listPage()} {
			b := AppendList(nil, page, truncated)
			got, gotTrunc, err := DecodeList(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 && len(page) == 0 {
				got, page = nil, nil
			}
			if !reflect.DeepEqual(got, page) || gotTrunc != truncated {
				t.Fatalf("decoded\n%+v %v\nwant\n%+v %v", got, gotTrunc, page, truncated)
			}
		}
	}
}

// A page that is cut short or altered is an error, never a panic or a
// shorter listing taken as whole.
func TestListBinaryRejectsDamage(t *testing.T) {
	b := AppendList(nil, listPage(), true)
	for n := range len(b) {
		if _, _, err := DecodeList(b[:n]); !errors.Is(err, errBadList) {
			t.Fatalf("page cut to %d of %d bytes: err %v, want errBadList", n, len(b), err)
		}
	}
	if _, _, err := DecodeList(append(b[:len(b):len(b)], 0)); !errors.Is(err, errBadList) {
		t.Fatalf("page with a trailing byte: err %v, want errBadList", err)
	}
	for i := range b {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			d := append([]byte(nil), b...)
			d[i] ^= x
			DecodeList(d) // must not panic
		}
	}
}

// The client asks for the binary page and reads it; a server that
// predates it answers JSON, which the client still reads.
func TestListFormats(t *testing.T) {
	page := listPage()
	var gotFormat string
	binServer, binAddr := fake(t, func(w http.ResponseWriter, r *http.Request) {
		gotFormat = r.URL.Query().Get(ParamFormat)
		WriteList(w, r, page, true)
	})
	oldServer, oldAddr := fake(t, func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, ListResponse{Entries: page, Truncated: true})
	})
	for _, c := range []struct {
		name   string
		client *Client
		addr   string
	}{{"binary", binServer, binAddr}, {"json", oldServer, oldAddr}} {
		got, truncated, err := c.client.List(context.Background(), c.addr, metadata.ListQuery{Bucket: "b"})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(got, page) || !truncated {
			t.Fatalf("%s: listed\n%+v %v\nwant\n%+v", c.name, got, truncated, page)
		}
	}
	if gotFormat != FormatBinary {
		t.Fatalf("client asked for format %q, want %q", gotFormat, FormatBinary)
	}
	// An old client (no format asked) gets JSON.
	r, _ := http.NewRequest(http.MethodGet, "http://x"+PathList, nil)
	w := httptest.NewRecorder()
	WriteList(w, r, page, false)
	var lr ListResponse
	if err := json.Unmarshal(w.Body.Bytes(), &lr); err != nil || !reflect.DeepEqual(lr.Entries, page) {
		t.Fatalf("JSON answer %q: %v", w.Body, err)
	}
}

// benchPage is a recursive listing's page as one server sends it: 1,000
// keys of 1 KiB objects under a few prefixes, written by a few gateways.
func benchPage() []metadata.ListEntry {
	at := time.Unix(1764968400, 0).UTC()
	es := make([]metadata.ListEntry, 1000)
	for i := range es {
		es[i] = metadata.ListEntry{
			Key:      fmt.Sprintf("rb-1a2b3c4d/meta/p%03d/o%05d", i%100, i),
			Version:  metadata.Version{TS: at.UnixNano() + int64(i), Writer: fmt.Sprintf("gw-%032x", i%2)},
			Size:     1024,
			ETag:     fmt.Sprintf("%032x", i*7919),
			Modified: at.Add(time.Duration(i) * time.Millisecond),
			Code:     "rs-6-3",
		}
	}
	slices.SortFunc(es, func(a, b metadata.ListEntry) int { return strings.Compare(a.Key, b.Key) })
	return es
}

// BenchmarkListPage encodes and decodes a page of 1,000 rows, both ends
// of the wire (JSON: what servers sent before the binary form).
func BenchmarkListPage(b *testing.B) {
	page := benchPage()
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			raw, err := json.Marshal(ListResponse{Entries: page})
			if err != nil {
				b.Fatal(err)
			}
			var lr ListResponse
			if err := json.Unmarshal(raw, &lr); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(raw))/float64(len(page)), "bytes/row")
		}
	})
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = AppendList(buf[:0], page, false)
			if _, _, err := DecodeList(buf); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(buf))/float64(len(page)), "bytes/row")
		}
	})
}
