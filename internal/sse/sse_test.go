package sse

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"io"
	"math/rand"
	"testing"
)

func sealAll(t *testing.T, key DataKey, plain []byte) []byte {
	t.Helper()
	out, err := io.ReadAll(NewEncrypter(key, bytes.NewReader(plain), int64(len(plain))))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(out)) != SealedSize(int64(len(plain))) {
		t.Fatalf("sealed %d bytes into %d, SealedSize says %d", len(plain), len(out), SealedSize(int64(len(plain))))
	}
	return out
}

// openRange reads plaintext [off, off+length) of a sealed part as the
// gateway does: only the span's stored bytes, fed in odd-sized writes.
func openRange(key DataKey, sealed []byte, plainSize, off, length int64) ([]byte, error) {
	var out bytes.Buffer
	w, span := NewWriter(key, plainSize, off, length, &out)
	b := sealed[span.Off : span.Off+span.Len]
	for len(b) > 0 {
		n := min(len(b), 7000)
		if _, err := w.Write(b[:n]); err != nil {
			return nil, err
		}
		b = b[n:]
	}
	return out.Bytes(), w.Close()
}

func TestRoundTripAndRanges(t *testing.T) {
	key, _ := NewDataKey()
	P := int64(PackageSize)
	for _, size := range []int64{0, 1, P - 1, P, P + 1, 3*P + 5, 4 * P} {
		plain := make([]byte, size)
		rand.New(rand.NewSource(size)).Read(plain)
		sealed := sealAll(t, key, plain)
		if got, err := PlainSize(int64(len(sealed))); err != nil || got != size {
			t.Fatalf("PlainSize(%d) = %d, %v; want %d", len(sealed), got, err, size)
		}
		if size > 64 && bytes.Contains(sealed, plain[:64]) {
			t.Fatalf("size %d: plaintext found in the sealed bytes", size)
		}
		ranges := [][2]int64{{0, size}}
		for _, b := range []int64{P - 1, P, P + 1, 2*P - 1, 2 * P, 3 * P} {
			for _, l := range []int64{1, 2, P, P + 2} {
				if b+l <= size {
					ranges = append(ranges, [2]int64{b, l})
				}
			}
		}
		if size > 0 {
			ranges = append(ranges, [2]int64{size - 1, 1})
		}
		for _, r := range ranges {
			got, err := openRange(key, sealed, size, r[0], r[1])
			if err != nil {
				t.Fatalf("size %d range %v: %v", size, r, err)
			}
			if !bytes.Equal(got, plain[r[0]:r[0]+r[1]]) {
				t.Fatalf("size %d range %v: wrong plaintext", size, r)
			}
			span := SpanOf(size, r[0], r[1])
			if span.Len > (r[1]/PackageSize+2)*sealedPackage {
				t.Fatalf("size %d range %v: span %+v reads more packages than the range covers", size, r, span)
			}
		}
	}
}

func TestPlainSizeRefusesImpossibleLengths(t *testing.T) {
	for _, n := range []int64{-1, 1, TagSize, sealedPackage + 3} {
		if _, err := PlainSize(n); !errors.Is(err, ErrSize) {
			t.Errorf("PlainSize(%d): %v, want ErrSize", n, err)
		}
	}
}

func TestTamperReorderTruncate(t *testing.T) {
	key, _ := NewDataKey()
	size := int64(3*PackageSize + 100)
	plain := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(plain)
	sealed := sealAll(t, key, plain)

	flipped := bytes.Clone(sealed)
	flipped[PackageSize+10] ^= 1
	if _, err := openRange(key, flipped, size, 0, size); !errors.Is(err, ErrAuth) {
		t.Errorf("flipped bit: %v, want ErrAuth", err)
	}
	swapped := bytes.Clone(sealed)
	copy(swapped[:sealedPackage], sealed[sealedPackage:2*sealedPackage])
	copy(swapped[sealedPackage:2*sealedPackage], sealed[:sealedPackage])
	if _, err := openRange(key, swapped, size, 0, 2*PackageSize); !errors.Is(err, ErrAuth) {
		t.Errorf("swapped packages: %v, want ErrAuth", err)
	}
	// Cut after a full package: the new last package was not sealed as last.
	if _, err := openRange(key, sealed[:2*sealedPackage], 2*PackageSize, 0, 2*PackageSize); !errors.Is(err, ErrAuth) {
		t.Errorf("truncated: %v, want ErrAuth", err)
	}
	other, _ := NewDataKey()
	if _, err := openRange(other, sealed, size, 0, 10); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong data key: %v, want ErrAuth", err)
	}
	if _, err := Open(key, 3, true, sealed[3*sealedPackage:], nil); err != nil {
		t.Errorf("Open of the last package: %v", err)
	}
	if _, err := Open(key, 3, false, sealed[3*sealedPackage:], nil); !errors.Is(err, ErrAuth) {
		t.Errorf("Open of the last package as not last: %v, want ErrAuth", err)
	}
}

func TestEncrypterShortBody(t *testing.T) {
	key, _ := NewDataKey()
	_, err := io.ReadAll(NewEncrypter(key, bytes.NewReader(make([]byte, 10)), 20))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %v, want io.ErrUnexpectedEOF", err)
	}
	// Past the announced size, reads reach the body itself.
	e := NewEncrypter(key, bytes.NewReader(make([]byte, 30)), 20)
	got, _ := io.ReadAll(e)
	if len(got) != int(SealedSize(20))+10 {
		t.Fatalf("read %d bytes, want the sealed 20 then the 10 extra", len(got))
	}
}

func TestKeyringRotation(t *testing.T) {
	line1, _ := NewKeyLine("k1")
	old, err := ParseKeyring([]byte("# cluster keys\n" + line1))
	if err != nil {
		t.Fatal(err)
	}
	dk, _ := NewDataKey()
	sealedOld, _ := old.Seal(dk)

	line2, _ := NewKeyLine("k2")
	rotated, err := ParseKeyring([]byte(line1 + "\n" + line2))
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Newest() != "k2" {
		t.Fatalf("newest %q, want k2", rotated.Newest())
	}
	if got, err := rotated.Open(sealedOld); err != nil || got != dk {
		t.Fatalf("a key sealed before the rotation: %v", err)
	}
	sealedNew, _ := rotated.Seal(dk)
	if _, err := old.Open(sealedNew); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old ring opening a key sealed by k2: %v, want ErrUnknownKey", err)
	}
	// A ring with the same ID but another key refuses it.
	line1b, _ := NewKeyLine("k1")
	imposter, _ := ParseKeyring([]byte(line1b))
	if _, err := imposter.Open(sealedOld); !errors.Is(err, ErrAuth) {
		t.Fatalf("another key under the same ID: %v, want ErrAuth", err)
	}
	for _, bad := range []string{"", "k1", "k1 notbase64", "k1 AAAA", line1 + line1} {
		if _, err := ParseKeyring([]byte(bad)); err == nil {
			t.Errorf("ParseKeyring(%q) accepted", bad)
		}
	}
}

func customer(t *testing.T) (CustomerKey, string, string) {
	raw := make([]byte, KeySize)
	rand.New(rand.NewSource(int64(len(t.Name())))).Read(raw)
	sum := md5.Sum(raw)
	k, m := base64.StdEncoding.EncodeToString(raw), base64.StdEncoding.EncodeToString(sum[:])
	ck, err := ParseCustomerKey("AES256", k, m)
	if err != nil {
		t.Fatal(err)
	}
	return ck, k, m
}

func TestCustomerKey(t *testing.T) {
	ck, k, m := customer(t)
	if ck.MD5() != m {
		t.Fatalf("MD5 %s, want %s", ck.MD5(), m)
	}
	for _, bad := range [][3]string{{"AES128", k, m}, {"AES256", "AAAA", m}, {"AES256", k, "AAAA"}} {
		if _, err := ParseCustomerKey(bad[0], bad[1], bad[2]); !errors.Is(err, ErrCustomerKey) {
			t.Errorf("ParseCustomerKey%v: %v, want ErrCustomerKey", bad, err)
		}
	}
	v, err := ck.NewVerifier()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(v.MAC, ck.key) || bytes.Contains(v.Salt, ck.key) {
		t.Fatal("verifier holds the key")
	}
	other := CustomerKey{key: bytes.Repeat([]byte{7}, KeySize)}
	if !v.Matches(ck) || v.Matches(other) {
		t.Fatal("verifier does not tell the key from another")
	}
	dk, _ := NewDataKey()
	sealed, _ := ck.Seal(dk)
	if got, err := ck.Open(sealed); err != nil || got != dk {
		t.Fatalf("Open: %v", err)
	}
	if _, err := other.Open(sealed); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong customer key: %v, want ErrAuth", err)
	}
	line, _ := NewKeyLine("k")
	kr, _ := ParseKeyring([]byte(line))
	if _, err := kr.Open(sealed); !errors.Is(err, ErrAuth) {
		t.Fatalf("keyring opening a customer-sealed key: %v, want ErrAuth", err)
	}
}
