package shardrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/regen-s3/regen/metadata"
)

// versionsOf is a lookup's answer with a current manifest holding data
// and one previous version.
func versionsOf(key string, committed bool) KeyVersions {
	cur := &metadata.Manifest{Bucket: "b", Key: key, Version: metadata.Version{TS: 2, Writer: "gw"}, Size: 3,
		ETag: "e", UserMeta: map[string]string{"a": "1"}, Modified: time.Unix(2, 0).UTC(), Code: "rs-2-1",
		Lock: &metadata.Lock{LegalHold: true}, Inline: []byte("abc")}
	prev := &metadata.Manifest{Bucket: "b", Key: key, Version: metadata.Version{TS: 1, Writer: "gw"}, Deleted: true,
		Modified: time.Unix(1, 0).UTC()}
	return KeyVersions{Current: cur, Previous: []*metadata.Manifest{prev}, Committed: committed}
}

// rawOf is what a server sends for k: each manifest's JSON without its
// inline data, and the data apart.
func rawOf(t *testing.T, k KeyVersions) RawKeyVersions {
	t.Helper()
	if k.Err != "" || k.Current == nil {
		return RawKeyVersions{Err: k.Err}
	}
	out := RawKeyVersions{Found: true, Committed: k.Committed}
	for _, m := range append([]*metadata.Manifest{k.Current}, k.Previous...) {
		mm := *m
		mm.Inline = nil
		js, err := json.Marshal(&mm)
		if err != nil {
			t.Fatal(err)
		}
		out.Manifests = append(out.Manifests, metadata.RawManifest{JSON: js, Inline: m.Inline})
	}
	return out
}

func versionsReply(t *testing.T) ([]KeyVersions, []byte) {
	want := []KeyVersions{versionsOf("k1", true), {}, {Err: "disk on fire"}, versionsOf("k2", false)}
	var raw []RawKeyVersions
	for _, k := range want {
		raw = append(raw, rawOf(t, k))
	}
	return want, AppendVersions(nil, raw)
}

func TestVersionsBinaryRoundTrip(t *testing.T) {
	want, b := versionsReply(t)
	got, err := DecodeVersions(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
	}
	if got, err := DecodeVersions(AppendVersions(nil, nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty reply: %v %v", got, err)
	}
}

// A reply that is cut short or altered is an error, never a panic or a
// shorter answer taken as whole.
func TestVersionsBinaryRejectsDamage(t *testing.T) {
	_, b := versionsReply(t)
	for n := range len(b) {
		if _, err := DecodeVersions(b[:n]); !errors.Is(err, errBadVersions) {
			t.Fatalf("reply cut to %d of %d bytes: err %v, want errBadVersions", n, len(b), err)
		}
	}
	if _, err := DecodeVersions(append(b[:len(b):len(b)], 0)); !errors.Is(err, errBadVersions) {
		t.Fatalf("reply with a trailing byte: err %v, want errBadVersions", err)
	}
	for i := range b {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			d := bytes.Clone(b)
			d[i] ^= x
			DecodeVersions(d) // must not panic
		}
	}
}

// The client asks for the binary reply and reads it; a server that
// predates it answers JSON, which the client still reads. Single and
// batched lookups alike.
func TestVersionsFormats(t *testing.T) {
	k := versionsOf("k", true)
	var gotFormats []string
	binServer, binAddr := fake(t, func(w http.ResponseWriter, r *http.Request) {
		gotFormats = append(gotFormats, r.URL.Query().Get(ParamFormat))
		if r.URL.Path == PathManifestVersionsBatch {
			WriteVersions(w, []RawKeyVersions{rawOf(t, k), {}})
			return
		}
		WriteVersions(w, []RawKeyVersions{rawOf(t, k)})
	})
	oldServer, oldAddr := fake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == PathManifestVersionsBatch {
			WriteJSON(w, http.StatusOK, VersionsBatchResponse{Keys: []KeyVersions{k, {}}})
			return
		}
		WriteJSON(w, http.StatusOK, ManifestVersionsResponse{Current: k.Current, Previous: k.Previous, Committed: true})
	})
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		client *Client
		addr   string
	}{{"binary", binServer, binAddr}, {"json", oldServer, oldAddr}} {
		got, err := c.client.LookupVersions(ctx, c.addr, "b", "k", true)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(KeyVersions{Current: got.Current, Previous: got.Previous, Committed: got.Committed}, k) {
			t.Fatalf("%s: looked up\n%+v\nwant\n%+v", c.name, got, k)
		}
		batch, err := c.client.GetManifestVersionsBatch(ctx, c.addr, "b", []string{"k", "missing"})
		if err != nil {
			t.Fatalf("%s batch: %v", c.name, err)
		}
		if !reflect.DeepEqual(batch[0], k) || batch[1].Current != nil || batch[1].Err != "" {
			t.Fatalf("%s batch: looked up\n%+v\nwant\n%+v and nothing", c.name, batch, k)
		}
	}
	if !reflect.DeepEqual(gotFormats, []string{FormatBinary, FormatBinary}) {
		t.Fatalf("client asked for formats %q, want binary twice", gotFormats)
	}
}

// A binary reply that names an error for the one key looked up fails the
// lookup with that error, never reads as absent.
func TestVersionsBinaryKeyError(t *testing.T) {
	client, addr := fake(t, func(w http.ResponseWriter, r *http.Request) {
		WriteVersions(w, []RawKeyVersions{{Err: "disk on fire"}})
	})
	_, err := client.LookupVersions(context.Background(), addr, "b", "k", false)
	var ne *NodeError
	if !errors.As(err, &ne) || errors.Is(err, ErrNotFound) {
		t.Fatalf("lookup: %v, want a NodeError that is not NotFound", err)
	}
}

// A manifest whose stored JSON does not decode fails its own key only:
// the other keys of the batch are answered.
func TestVersionsBinaryCorruptRecord(t *testing.T) {
	good := versionsOf("k", true)
	bad := RawKeyVersions{Found: true, Manifests: []metadata.RawManifest{{JSON: []byte(`{"bucket":`)}}}
	got, err := DecodeVersions(AppendVersions(nil, []RawKeyVersions{bad, rawOf(t, good)}))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Err == "" || got[0].Current != nil || !reflect.DeepEqual(got[1], good) {
		t.Fatalf("decoded %+v, want an error for the first key and the second whole", got)
	}
}
