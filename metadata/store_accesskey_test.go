package metadata

import (
	"context"
	"errors"
	"testing"
)

func TestAccessKeys(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "")
	put := func(k AccessKey, wantStored bool) {
		t.Helper()
		stored, err := s.PutAccessKey(ctx, &k)
		if err != nil || stored != wantStored {
			t.Fatalf("PutAccessKey(%+v) = %v, %v; want stored=%v", k, stored, err, wantStored)
		}
	}
	sealed := []byte("sealed")
	put(AccessKey{ID: "RKB", Name: "bob", Version: ver(2), SealedSecret: sealed}, true)
	put(AccessKey{ID: "RKB", Name: "bob", Version: ver(1), SealedSecret: sealed, Admin: true}, false) // older
	put(AccessKey{ID: "RKB", Version: ver(3), Deleted: true}, true)
	put(AccessKey{ID: "RKB", Name: "bob", Version: ver(2), SealedSecret: sealed}, false) // a late create cannot bring it back
	put(AccessKey{ID: "RKA", Name: "alice", Version: ver(1), SealedSecret: sealed}, true)
	for _, bad := range []AccessKey{{ID: "x", SealedSecret: sealed}, {Version: ver(1), SealedSecret: sealed}, {ID: "x", Version: ver(1)}} {
		if _, err := s.PutAccessKey(ctx, &bad); !errors.Is(err, ErrInvalidAccessKey) {
			t.Errorf("PutAccessKey(%+v): %v, want ErrInvalidAccessKey", bad, err)
		}
	}
	all, err := s.ListAccessKeys(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "alice" || all[1].ID != "RKB" || !all[1].Deleted || all[1].SealedSecret != nil {
		t.Fatalf("ListAccessKeys = %+v, %v", all, err)
	}
	// Access keys and buckets do not see each other's records.
	if _, err := s.PutBucket(ctx, &Bucket{Name: "RKA", Version: ver(1)}); err != nil {
		t.Fatal(err)
	}
	if all, _ := s.ListAccessKeys(ctx); len(all) != 2 {
		t.Errorf("a bucket record shows among access keys: %+v", all)
	}
	if bs, _ := s.ListBuckets(ctx); len(bs) != 1 {
		t.Errorf("access keys show among buckets: %+v", bs)
	}
}
