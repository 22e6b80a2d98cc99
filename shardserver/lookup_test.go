package shardserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// inlineManifest is a small object stored in its manifest, with a field
// of every kind a lookup must carry.
func inlineManifest(key string, ts int64, data []byte) *metadata.Manifest {
	return &metadata.Manifest{
		Bucket: "b", Key: key, Version: metadata.Version{TS: ts, Writer: "gw"},
		Size: int64(len(data)), ETag: "e", ContentType: "text/plain",
		UserMeta: map[string]string{"color": "blue"}, Headers: map[string]string{"Cache-Control": "no-cache"},
		Tags: map[string]string{"t": "v"}, Checksums: map[string]string{"CRC32C": "AAAAAA=="},
		Lock:     &metadata.Lock{Mode: "GOVERNANCE", RetainUntil: time.Unix(ts+3600, 0).UTC()},
		Modified: time.Unix(ts, 0).UTC(), Code: "rs-2-1", ChunkSize: 8,
		Inline: data,
	}
}

// jsonLookup asks for a lookup the way a gateway that predates the
// binary reply does, and decodes it as that gateway would.
func (e *testEnv) jsonLookup(t *testing.T, key string, inline bool) shardrpc.ManifestVersionsResponse {
	t.Helper()
	q := url.Values{shardrpc.ParamBucket: {"b"}, shardrpc.ParamKey: {key}}
	if !inline {
		q.Set(shardrpc.ParamInline, "0")
	}
	resp, err := signedHTTP().Get(e.url + shardrpc.PathManifestVersions + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("a request without %s got a %q reply", shardrpc.ParamFormat, ct)
	}
	var out shardrpc.ManifestVersionsResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLookupBinaryMatchesJSON: the binary lookup reply, single and
// batched, tells the client exactly what the JSON reply does (current,
// previous versions, inline data or none, the committed mark, absent
// keys), and a client that does not ask for it still gets JSON.
func TestLookupBinaryMatchesJSON(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 256)
	v1, v2 := inlineManifest("k", 1, data[:100]), inlineManifest("k", 2, data)
	for _, m := range []*metadata.Manifest{v1, v2, inlineManifest("one", 3, data)} {
		if _, _, err := e.client.PutManifest(ctx, e.addr, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"k", "one"} {
		for _, inline := range []bool{true, false} {
			got, err := e.client.LookupVersions(ctx, e.addr, "b", key, inline)
			if err != nil {
				t.Fatal(err)
			}
			want := e.jsonLookup(t, key, inline)
			if want.Current == nil || (key == "k") != (len(want.Previous) == 1) {
				t.Fatalf("%s: the JSON reply is not what the test set up: %+v", key, want)
			}
			if !sameVersions(got.Current, got.Previous, want.Current, want.Previous) || got.Committed != want.Committed {
				t.Errorf("%s inline=%v: binary reply %+v, JSON %+v", key, inline, got, want)
			}
			if inline && !bytes.Equal(got.Current.Inline, want.Current.Inline) || !inline && got.Current.Inline != nil {
				t.Errorf("%s inline=%v: inline data %d bytes, want %d", key, inline, len(got.Current.Inline), len(want.Current.Inline))
			}
		}
	}
	if _, err := e.client.LookupVersions(ctx, e.addr, "b", "missing", false); !isNotFound(err) {
		t.Fatalf("lookup of a missing key: %v, want NotFound", err)
	}

	keys := []string{"k", "missing", "one"}
	got, err := e.client.GetManifestVersionsBatch(ctx, e.addr, "b", keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, key := range keys {
		if key == "missing" {
			if got[i].Current != nil || got[i].Err != "" {
				t.Errorf("batch: missing key answered %+v", got[i])
			}
			continue
		}
		want := e.jsonLookup(t, key, false)
		if !sameVersions(got[i].Current, got[i].Previous, want.Current, want.Previous) || got[i].Committed != want.Committed {
			t.Errorf("batch: %s answered %+v, want %+v", key, got[i], want)
		}
	}
}

// sameVersions compares two lookups' manifests, an empty and a nil slice
// of previous versions alike.
func sameVersions(cur1 *metadata.Manifest, prev1 []*metadata.Manifest, cur2 *metadata.Manifest, prev2 []*metadata.Manifest) bool {
	if len(prev1) != len(prev2) {
		return false
	}
	for i := range prev1 {
		if !reflect.DeepEqual(prev1[i], prev2[i]) {
			return false
		}
	}
	return reflect.DeepEqual(cur1, cur2)
}

func isNotFound(err error) bool { return errors.Is(err, shardrpc.ErrNotFound) }

// lookupAllocsBound bounds the allocations of one lookup of a small object
// with its data, client and server together. With the JSON reply it took
// 246 (259 before the store decoded with goccy/go-json); with the binary
// one 192.
const lookupAllocsBound = 220

// TestLookupAllocs: a lookup reply costs neither end a decode and encode
// of the stored manifest nor base64 of the inline data.
func TestLookupAllocs(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	m := inlineManifest("k", 1, bytes.Repeat([]byte{'x'}, 4096))
	if _, _, err := e.client.PutManifest(ctx, e.addr, m); err != nil {
		t.Fatal(err)
	}
	var failed error
	n := testing.AllocsPerRun(200, func() {
		if _, err := e.client.LookupVersions(ctx, e.addr, "b", "k", true); err != nil {
			failed = err
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	t.Logf("%.0f allocations per lookup", n)
	if n > lookupAllocsBound {
		t.Fatalf("%.0f allocations per lookup, want at most %d", n, lookupAllocsBound)
	}
}
