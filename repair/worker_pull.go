package repair

import (
	"bufio"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/metadata"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// pullExecutor is the worker's own conventional repair (PULL-Rep with the
// coordinator as relayer): stream k helper shard files, decode stripe by
// stripe, stream every rebuilt shard to its destination, verify the
// CRC-32C the destination computed against the manifest's. It needs
// nothing from the shard servers but plain shard GET and PUT, so it always
// works; the executors of exec_*.go add PUSH chains and CORE.
type pullExecutor struct {
	shards Shards
	w      *Worker // for rate measurements; nil in tests
	codes  *codec.Cache
}

func (e *pullExecutor) Run(ctx context.Context, t Task) (Result, error) {
	if err := t.Validate(); err != nil {
		return Result{}, err
	}
	code, err := e.codes.Get(t.Code)
	if err != nil {
		return Result{}, err
	}
	k, n := code.DataShards(), code.TotalShards()
	geo := metadata.StripeGeometry{K: k, ChunkSize: t.ChunkSize, Multiple: int64(code.ShardMultiple())}
	helpers := t.Helpers
	if len(helpers) < k {
		helpers = nil
		for i := range n {
			if !slices.Contains(t.Lost, i) && len(helpers) < k {
				helpers = append(helpers, i)
			}
		}
	}
	helpers = helpers[:k]
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Helper streams: the whole shard file of each, read sequentially.
	readers := make(map[int]*bufio.Reader, k)
	for _, i := range helpers {
		nd := t.Placement[i]
		rc, err := e.shards.GetShard(ctx, nd.Addr, t.FileID, i, 0, -1)
		if err != nil {
			return Result{}, &ExecError{Node: nd.ID, Op: "read helper", Err: err}
		}
		defer rc.Close()
		readers[i] = bufio.NewReaderSize(rc, 256<<10)
	}
	// Destination streams.
	type sink struct {
		pw   *io.PipeWriter
		done chan error
	}
	sinks := map[int]*sink{}
	var g errgroup.Group
	for _, i := range t.Lost {
		pr, pw := io.Pipe()
		s := &sink{pw: pw, done: make(chan error, 1)}
		sinks[i] = s
		d := t.Dest[i]
		g.Go(func() error {
			info, err := e.shards.PutShard(ctx, d.Addr, t.FileID, i, pr)
			pr.CloseWithError(err)
			switch {
			case err != nil:
				err = &ExecError{Node: d.ID, Op: "write rebuilt shard", Err: err}
			case info.CRC != t.ShardCRC[i]:
				err = &ExecError{Node: d.ID, Op: "verify rebuilt shard",
					Err: fmt.Errorf("shard %d: CRC %08x, manifest says %08x", i, info.CRC, t.ShardCRC[i])}
			}
			s.done <- err
			return err
		})
	}
	abort := func(err error) (Result, error) {
		for _, s := range sinks {
			s.pw.CloseWithError(err)
		}
		g.Wait()
		return Result{}, err
	}
	var read int64
	want := make([]bool, n)
	for _, i := range t.Lost {
		want[i] = true
	}
	stripes := geo.Stripes(t.PartSize)
	for s := range stripes {
		chunk, _ := geo.Chunk(t.PartSize, s)
		shards := make([][]byte, n)
		for _, i := range helpers {
			buf := make([]byte, chunk)
			if _, err := io.ReadFull(readers[i], buf); err != nil {
				return abort(&ExecError{Node: t.Placement[i].ID, Op: "read helper", Err: err})
			}
			shards[i] = buf
			read += chunk
		}
		if err := code.ReconstructSome(shards, want); err != nil {
			return abort(&ExecError{Op: "decode", Err: err})
		}
		for _, i := range t.Lost {
			if _, err := sinks[i].pw.Write(shards[i]); err != nil {
				return abort(&ExecError{Node: t.Dest[i].ID, Op: "write rebuilt shard", Err: err})
			}
		}
	}
	for _, s := range sinks {
		s.pw.Close()
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	secs := time.Since(start).Seconds()
	written := int64(len(t.Lost)) * geo.ShardFileSize(t.PartSize)
	if e.w != nil && secs > 0 {
		e.w.observe(t, helpers, float64(read)/secs)
	}
	res := Result{Method: PullRep, BytesMoved: read + written, MaxNodeIn: read, Seconds: secs, Rebuilt: map[int]Node{}}
	for _, i := range t.Lost {
		res.Rebuilt[i] = t.Dest[i]
	}
	return res, nil
}

// observe records the relayer's measured intake as the network rate of
// the helpers (each sent its share at rate/k) and of the destinations.
// The planner then predicts with what this cluster really does.
func (w *Worker) observe(t Task, helpers []int, intake float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	per := intake // each helper stream ran concurrently for the same time
	upd := func(id string, v float64) {
		r := w.rates[id]
		if r.Net == 0 {
			r.Net = v
		} else {
			r.Net = 0.7*r.Net + 0.3*v
		}
		// NB: the relayer path is the bottleneck here, so one measured
		// rate stands for network and disk alike.
		r.DiskRead, r.DiskWrite = r.Net*float64(len(helpers)), r.Net*float64(len(helpers))
		w.rates[id] = r
	}
	for _, i := range helpers {
		upd(t.Placement[i].ID, per/float64(len(helpers)))
	}
	for _, d := range t.Dest {
		upd(d.ID, per)
	}
}

// crcOf is the CRC-32C of r's bytes.
func crcOf(r io.Reader) (uint32, int64, error) {
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, r)
	return h.Sum32(), n, err
}
