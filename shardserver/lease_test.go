package shardserver

import (
	"errors"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// TestLeaseFencesWrites: while a lease is held, only its holder's writes
// are admitted; a write without the lease is refused; an expired holder
// is refused; and a lease is not granted while a write admitted without
// it is still landing.
func TestLeaseFencesWrites(t *testing.T) {
	var lt leaseTable
	now := time.Unix(1000, 0)
	const name = "obj/b/k"
	done, err := lt.admit(name, shardrpc.NoLease, now)
	if err != nil {
		t.Fatalf("unleased write on a free key: %v", err)
	}
	if err := lt.acquire(name, "c1", time.Second, now); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("lease granted while a write lands: %v", err)
	}
	done()
	if err := lt.acquire(name, "c1", time.Second, now); err != nil {
		t.Fatalf("acquire after the write landed: %v", err)
	}
	if _, err := lt.admit(name, shardrpc.NoLease, now); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("unleased write admitted under c1's lease: %v", err)
	}
	if _, err := lt.admit(name, "c2", now); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("c2's write admitted under c1's lease: %v", err)
	}
	d, err := lt.admit(name, "c1", now)
	if err != nil {
		t.Fatalf("holder's write refused: %v", err)
	}
	d()
	later := now.Add(2 * time.Second)
	if _, err := lt.admit(name, "c1", later); !errors.Is(err, shardrpc.ErrLeaseHeld) {
		t.Fatalf("expired holder's write admitted: %v", err)
	}
	if d, err := lt.admit(name, shardrpc.NoLease, later); err != nil {
		t.Fatalf("unleased write after expiry: %v", err)
	} else {
		d()
	}
}
