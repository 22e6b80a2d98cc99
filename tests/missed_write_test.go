package tests

import (
	"errors"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// A write that missed one server which never went away (a transient error
// there: no death, no return, so no peer ever asks for a full sync) must
// still be healed: the periodic sync of recent writes gives that server
// the manifest and rebuilds its shard in place. The miss is simulated on
// a finished PUT by taking back the manifest and deleting the shard on one
// server of the placement, through its own shard API.
func TestWriteMissedByLiveServerIsHealed(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	d := startDev(t, "--sync-interval", "2s")
	c := d.client(t)
	rpc := shardrpc.New(d.info.Secret, nil)
	addrOf := map[string]string{}
	for _, s := range d.info.Shards {
		addrOf[s.ID] = s.Addr
	}
	mustMakeBucket(t, c, "missed")
	// Gossip converging at start looks like peers coming back, and each
	// such return asks for a full sync, which would heal the miss too. Let
	// those rounds pass, so only the periodic sync is left to find it.
	time.Sleep(6 * time.Second)
	data := randomData(300<<10+11, 41)
	put(t, c, "missed", "obj", data, minio.PutObjectOptions{})

	m, err := rpc.GetManifest(ctx(t), d.info.Shards[0].Addr, "missed", "obj")
	for i := 1; err != nil && i < len(d.info.Shards); i++ {
		m, err = rpc.GetManifest(ctx(t), d.info.Shards[i].Addr, "missed", "obj")
	}
	if err != nil {
		t.Fatal(err)
	}
	idx := len(m.Placement) - 1 // not the first holder, which does the healing
	x := addrOf[m.Placement[idx]]
	if err := rpc.AbortManifest(ctx(t), x, "missed", "obj", m.Version); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Parts {
		if err := rpc.DeleteShard(ctx(t), x, p.ID, idx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rpc.GetManifest(ctx(t), x, "missed", "obj"); !errors.Is(err, shardrpc.ErrNotFound) {
		t.Fatalf("the simulated miss left server %s a manifest (err %v)", m.Placement[idx], err)
	}

	waitFor(t, 60*time.Second, "the server that missed the write to hold its manifest and shard again", func() bool {
		cur, err := rpc.GetManifest(ctx(t), x, "missed", "obj")
		if err != nil || cur.Version != m.Version {
			return false
		}
		for _, p := range m.Parts {
			info, err := rpc.StatShard(ctx(t), x, p.ID, idx)
			if err != nil || info.CRC != p.ShardCRC[idx] {
				return false
			}
		}
		return true
	})
	if got := get(t, c, "missed", "obj", minio.GetObjectOptions{}); sha(got) != sha(data) {
		t.Fatal("the object differs after the heal")
	}
}
