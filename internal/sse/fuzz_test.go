package sse

import (
	"bytes"
	"testing"
)

// FuzzOpen feeds arbitrary stored bytes to the decoders of stored data:
// package opening (one package and a range through Writer) and sealed
// keys. None may panic, and none may accept bytes the key did not seal.
func FuzzOpen(f *testing.F) {
	var key DataKey
	copy(key[:], "fuzz key fuzz key fuzz key fuzz!")
	line := "k " + "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
	kr, err := ParseKeyring([]byte(line))
	if err != nil {
		f.Fatal(err)
	}
	sealedKey, _ := kr.Seal(key)
	small := make([]byte, 100)
	var enc bytes.Buffer
	enc.ReadFrom(NewEncrypter(key, bytes.NewReader(small), 100))
	f.Add(enc.Bytes(), int64(0), int64(10))
	f.Add(sealedKey, int64(0), int64(1))
	f.Add([]byte{}, int64(5), int64(-1))
	f.Fuzz(func(t *testing.T, stored []byte, off, length int64) {
		if p, err := Open(key, off, length%2 == 0, stored, nil); err == nil && !bytes.Equal(stored, enc.Bytes()) {
			t.Fatalf("opened %d bytes the key did not seal: %x", len(p), stored)
		}
		if dk, err := kr.Open(stored); err == nil && dk != key {
			t.Fatalf("keyring opened a key it did not seal")
		}
		plainSize, err := PlainSize(int64(len(stored)))
		if err != nil || off < 0 || length < 0 || off > plainSize || length > plainSize-off {
			return
		}
		var out bytes.Buffer
		w, span := NewWriter(key, plainSize, off, length, &out)
		if span.Off < 0 || span.Off+span.Len > int64(len(stored)) {
			t.Fatalf("span %+v outside %d stored bytes", span, len(stored))
		}
		if _, err := w.Write(stored[span.Off : span.Off+span.Len]); err == nil && w.Close() == nil && !bytes.Equal(stored, enc.Bytes()) && length > 0 {
			t.Fatalf("range of bytes the key did not seal opened")
		}
	})
}
