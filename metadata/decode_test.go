package metadata

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// randString returns a string of up to n runes drawn from ASCII, control
// characters, JSON's special characters, multi-byte runes and invalid
// UTF-8 (which encoding/json writes as U+FFFD), so that every escape the
// encoder writes reaches the decoder.
func randString(r *rand.Rand, n int) string {
	pieces := []string{"a", "Z", "0", "/", " ", "\"", "\\", "\n", "\t", "\x00", "\x1f", "<", ">", "&",
		"é", "日本", "😀", "\u2028", "\xff", "\xc3", "%2F", "\\u0041"}
	var b []byte
	for range r.IntN(n + 1) {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return string(b)
}

func randMap(r *rand.Rand) map[string]string {
	switch r.IntN(3) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	m := map[string]string{}
	for range 1 + r.IntN(4) {
		m[randString(r, 6)] = randString(r, 12)
	}
	return m
}

func randBytes(r *rand.Rand) []byte {
	if r.IntN(3) == 0 {
		return nil
	}
	b := make([]byte, r.IntN(40))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randTime(r *rand.Rand) time.Time {
	switch r.IntN(4) {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC()
	case 2:
		return time.Unix(r.Int64N(4e9), 0).In(time.FixedZone("X", 3600*(r.IntN(25)-12)))
	}
	return time.Unix(-r.Int64N(4e9), r.Int64N(1e9)).UTC()
}

// randManifest fills every field of a Manifest, each sometimes empty.
func randManifest(r *rand.Rand) *Manifest {
	m := &Manifest{
		Bucket: randString(r, 8), Key: randString(r, 30),
		Version: Version{TS: r.Int64() - r.Int64(), Writer: randString(r, 10)},
		Deleted: r.IntN(4) == 0, Versioned: r.IntN(2) == 0, VersionID: randString(r, 8),
		Size: r.Int64N(1 << 40), ETag: randString(r, 32), ContentType: randString(r, 20),
		UserMeta: randMap(r), Headers: randMap(r), StorageClass: randString(r, 10), Modified: randTime(r),
		Checksums: randMap(r), ACL: randString(r, 6), Tags: randMap(r),
		Code: randString(r, 12), CodecFormat: r.IntN(5), ChunkSize: r.Int64N(1 << 30),
	}
	if r.IntN(3) == 0 {
		m.SSE = &Encryption{Customer: r.IntN(2) == 0, Salt: randBytes(r), MAC: randBytes(r), Overhead: r.Int64N(1000)}
	}
	if r.IntN(3) == 0 {
		m.Lock = &Lock{Mode: randString(r, 5), RetainUntil: randTime(r), LegalHold: r.IntN(2) == 0}
	}
	if r.IntN(4) > 0 {
		m.Placement = make([]string, r.IntN(16))
		for i := range m.Placement {
			m.Placement[i] = fmt.Sprintf("%016x", r.Uint64())
		}
	}
	if r.IntN(2) == 0 {
		for i := range r.IntN(5) {
			p := Part{Number: i + 1, ID: randString(r, 20), Size: r.Int64N(1 << 35), ETag: randString(r, 32),
				Checksums: randMap(r), SealedKey: randBytes(r)}
			if r.IntN(4) > 0 {
				p.ShardCRC = make([]uint32, r.IntN(16))
				for j := range p.ShardCRC {
					p.ShardCRC[j] = r.Uint32()
				}
			}
			m.Parts = append(m.Parts, p)
		}
	}
	return m
}

// TestDecodeMatchesEncodingJSON: decodeValue (goccy/go-json) reads what
// encodeValue (encoding/json) wrote into exactly the value encoding/json
// reads, nil and empty alike, for manifests and listing rows.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		m := randManifest(r)
		val, err := encodeValue(0, m)
		if err != nil {
			t.Fatal(err)
		}
		var want, got Manifest
		if err := json.Unmarshal(val[2:], &want); err != nil {
			t.Fatal(err)
		}
		if err := decodeValue(val, &got); err != nil {
			t.Fatalf("manifest %d: %v\n%s", i, err, val[2:])
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("manifest %d decodes differently:\n got %#v\nwant %#v\nfrom %s", i, got, want, val[2:])
		}
		var wantRow, gotRow listFields
		if err := json.Unmarshal(val[2:], &wantRow); err != nil {
			t.Fatal(err)
		}
		if err := decodeValue(val, &gotRow); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotRow, wantRow) {
			t.Fatalf("row %d decodes differently:\n got %#v\nwant %#v", i, gotRow, wantRow)
		}
	}
}

// TestDecodeRefusesWhatEncodingJSONRefuses: a damaged value is an error,
// as before, never a half-read manifest taken for a good one.
func TestDecodeRefusesWhatEncodingJSONRefuses(t *testing.T) {
	val, err := encodeValue(0, randManifest(rand.New(rand.NewPCG(3, 4))))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{val[:len(val)/2], append(val[:len(val):len(val)], '}'), append(val[:2:2], "{\"bucket\":1}"...),
		append(val[:2:2], "{\"placement\":\"x\"}"...), append(val[:2:2], "nul"...)} {
		var std Manifest
		if json.Unmarshal(bad[2:], &std) == nil {
			t.Fatalf("encoding/json reads %q", bad[2:])
		}
		var m Manifest
		if err := decodeValue(bad, &m); err == nil {
			t.Errorf("decodeValue reads %q, which encoding/json refuses", bad[2:])
		}
	}
}
