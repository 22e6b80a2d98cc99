package shardserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/stripe"
)

// A helper request for a window of stripes (a gateway's degraded read)
// streams exactly the plan's output for those stripes' chunks, for
// vector and scalar codes; a window outside the group is refused.
func TestRepairHelperStripeWindow(t *testing.T) {
	e := newEnv(t, nil)
	for _, name := range []string{"clay-6-3", "rs-6-3"} {
		t.Run(name, func(t *testing.T) {
			c, err := codec.Parse(name)
			if err != nil {
				t.Fatal(err)
			}
			chunk := int64(c.ShardMultiple() * 100)
			geo := stripe.Geometry(c, chunk)
			partSize := 3*int64(c.DataShards())*chunk + int64(c.DataShards())*chunk/2 + 7 // three full stripes and a short one
			const idx = 4
			shard := randBytes(7, int(geo.ShardFileSize(partSize)))
			fileID := "window-" + name
			if _, err := e.client.PutShard(context.Background(), e.addr, fileID, idx, bytes.NewReader(shard)); err != nil {
				t.Fatal(err)
			}
			lost := []int{1}
			plan, err := c.(codec.Regenerating).RepairPlan(lost)
			if err != nil {
				t.Fatal(err)
			}
			task := plan.Helper(idx)
			group := shardrpc.RepairGroup{Code: name, FileID: fileID, ChunkSize: chunk, PartSize: partSize}
			for _, w := range [][2]int64{{1, 1}, {2, 2}, {0, 4}} {
				rc, err := e.client.RepairHelper(context.Background(), e.addr, shardrpc.HelperRequest{RepairGroup: group, Lost: lost, Idx: idx, First: w[0], Count: w[1]})
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				var want []byte
				for s := w[0]; s < w[0]+w[1]; s++ {
					n, _ := geo.Chunk(partSize, s)
					if want, err = task.Produce(c.SubChunks(), shard[s*chunk:s*chunk+n], want); err != nil {
						t.Fatal(err)
					}
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("stripes %d+%d: %d bytes, want %d (or wrong bytes)", w[0], w[1], len(got), len(want))
				}
			}
			_, err = e.client.RepairHelper(context.Background(), e.addr, shardrpc.HelperRequest{RepairGroup: group, Lost: lost, Idx: idx, First: 3, Count: 2})
			if !errors.Is(err, shardrpc.ErrBadRequest) {
				t.Fatalf("stripes 3+2 of 4: %v, want a bad request", err)
			}
		})
	}
}
