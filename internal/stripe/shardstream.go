package stripe

import (
	"context"
	"fmt"
	"io"
)

// A read takes each shard's bytes for all its stripes from one stream: a
// single GetShard request from the first stripe that asks for the shard to
// the end of the shard's part of the read, consumed a stripe at a time in
// stripe order. A request per stripe per shard (66 for a 64 MiB GET at
// rs-6-3 with 1 MiB chunks, where 6 streams do) cost a round trip, a
// request's parsing, an open of the shard file and a goroutine at both
// ends for every MiB.
//
// Stripes are still fetched concurrently (Depth ahead of the writer), and
// hedging, failure handling and memory stay per stripe: a stripe reads its
// chunk of shard i only when every earlier stripe of the read has either
// read its own chunk of shard i or finished (it will not ask for it any
// more), so a stream's bytes go to the stripes in order. A stream that
// fails, or whose read was called off (its stripe decoded without it, or
// gave up on it), is closed; the next stripe to ask for that shard opens a
// new one from its own offset. So a slow or failed shard stream falls back
// to parity for the remaining stripes exactly as per-stripe requests did,
// with at most Depth stripes asking the slow server once more before it is
// known slow.

// shardStream is an open GetShard response and where it stands in the
// shard file.
type shardStream struct {
	rc       io.ReadCloser
	cancel   context.CancelFunc // ends rc's request
	pos, end int64              // shard-file offsets of rc's next byte and of its end
}

func (st *shardStream) close() {
	st.cancel()
	st.rc.Close()
}

// stripeTurns is what a stripe has done with the shard streams.
type stripeTurns struct {
	done bool   // its fetch returned: it reads no more shards
	read []bool // per shard: it has read (or given up reading) its chunk
}

// markRead records that the stripe is done with shard i.
func (t *stripeTurns) markRead(i int) {
	if t.read != nil {
		t.read[i] = true
	}
}

// initStreams sets up the reader's stream state.
func (r *reader) initStreams() {
	n := r.p.Code.TotalShards()
	r.streams = make([]*shardStream, n)
	r.busy = make([]bool, n)
	r.turns = make([]stripeTurns, r.last-r.first+1)
	r.changed = make(chan struct{})
}

// notifyLocked wakes every stripe waiting for its turn; r.mu is held.
func (r *reader) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// launched records that stripe s is being fetched. Stripes are launched
// in order, so every stripe a later one waits for has its record.
func (r *reader) launched(s int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turns[s-r.first].read = make([]bool, len(r.streams))
}

// stripeDone records that stripe s's fetch returned.
func (r *reader) stripeDone(s int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.turns[s-r.first].done = true
	r.turns[s-r.first].read = nil // no longer looked at
	for r.oldest < int64(len(r.turns)) && r.turns[r.oldest].done {
		r.oldest++
	}
	r.notifyLocked()
}

// waitTurn waits until stripe s may read from shard i's stream: no earlier
// stripe can still read from it, and nobody is.
func (r *reader) waitTurn(ctx context.Context, s int64, i int) error {
	for {
		r.mu.Lock()
		ok := !r.busy[i]
		for t := r.first + r.oldest; ok && t < s; t++ {
			tt := &r.turns[t-r.first]
			ok = tt.done || tt.read[i]
		}
		if ok {
			r.busy[i] = true
			r.mu.Unlock()
			return nil
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// endTurn gives shard i's stream up after stripe s's read of it; st is the
// stream to keep for the next stripe, nil if it is gone.
func (r *reader) endTurn(s int64, i int, st *shardStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st != nil && (r.closed || st.pos >= st.end) {
		st.close()
		st = nil
	}
	r.streams[i] = st
	r.busy[i] = false
	r.turns[s-r.first].markRead(i)
	r.notifyLocked()
}

// closeStreams closes the streams no stripe is reading; those being read
// are closed by their readers (endTurn), which the read's cancelled ctx
// stops.
func (r *reader) closeStreams() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for i, st := range r.streams {
		if st != nil && !r.busy[i] {
			st.close()
			r.streams[i] = nil
		}
	}
}

// streamEnd is where a stream of shard i opened for stripe s should end: at
// the end of the read when the shard stands in for another (parity, or a
// data shard stripe s does not need), else where the last stripe needing
// the shard ends (a ranged read may need it in no stripe after s).
func (r *reader) streamEnd(s int64, i int) int64 {
	hiOf := func(t int64) (bool, int64) {
		a, b := r.rangeOf(t)
		_, need, _, hi := r.span(t, a, b)
		return need[i], hi
	}
	if needed, _ := hiOf(s); needed {
		for t := r.last; t >= s; t-- {
			if needed, hi := hiOf(t); needed {
				return t*r.p.ChunkSize + hi
			}
		}
	}
	_, hi := hiOf(r.last)
	return r.last*r.p.ChunkSize + hi
}

// readShard returns length bytes of shard i from offset off for stripe s,
// from the shard's stream (opened, or opened again, as needed). started is
// called once the stripe's turn on the stream has come. ShardTimeout
// bounds the read from then on; ctx (the stripe's) calls it off.
func (r *reader) readShard(ctx context.Context, s int64, i int, off, length int64, started func()) ([]byte, error) {
	if err := r.waitTurn(ctx, s, i); err != nil {
		r.mu.Lock()
		r.turns[s-r.first].markRead(i)
		r.notifyLocked()
		r.mu.Unlock()
		return nil, err
	}
	if err := r.badErr(i); err != nil {
		// It failed for an earlier stripe while this one waited.
		r.endTurn(s, i, nil)
		return nil, err
	}
	started()
	r.mu.Lock()
	st := r.streams[i]
	r.streams[i] = nil
	r.mu.Unlock()
	if st != nil && (st.pos != off || off+length > st.end) {
		st.close() // not where this stripe's bytes are: start afresh
		st = nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.p.ShardTimeout)
	defer cancel()
	if st == nil {
		end := r.streamEnd(s, i)
		sctx, scancel := context.WithCancel(r.ctx)
		stop := context.AfterFunc(ctx, scancel)
		rc, err := r.shards.GetShard(sctx, r.p.Targets[i].Addr, r.p.FileID, i, off, end-off)
		if !stop() || err != nil {
			scancel()
			if rc != nil {
				rc.Close()
			}
			r.failedTurn(ctx, i, err)
			r.endTurn(s, i, nil)
			if err == nil {
				err = ctx.Err()
			}
			return nil, err
		}
		st = &shardStream{rc: rc, cancel: scancel, pos: off, end: end}
	}
	// NB: the stripe's ctx (a lost hedge race, the shard timeout) ends the
	// stream's request, which is what stops a read blocked on it.
	stop := context.AfterFunc(ctx, st.cancel)
	buf := getBuf(length)
	_, err := io.ReadFull(st.rc, buf)
	if !stop() {
		// The stream's request was ended (its bytes may be whole, but
		// the stripe no longer wants them).
		err = ctx.Err()
	}
	if err != nil {
		putBuf(buf)
		st.close()
		r.failedTurn(ctx, i, err)
		r.endTurn(s, i, nil)
		return nil, fmt.Errorf("reading shard %d: %w", i, err)
	}
	st.pos += length
	if st.pos >= st.end {
		// Read the end of the response (its trailer) so that its
		// connection is reused.
		stop := context.AfterFunc(ctx, st.cancel)
		_, _ = io.Copy(io.Discard, st.rc)
		stop()
	}
	r.endTurn(s, i, st)
	return buf, nil
}

// badErr returns why shard i failed earlier in the read, nil if it did not.
func (r *reader) badErr(i int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad[i]
}

// failedTurn marks shard i bad after err, unless the stripe called the
// read off. NB: before the turn passes on: the next stripe must not open
// the failed server's stream again (its gather marks it too, but later).
func (r *reader) failedTurn(ctx context.Context, i int, err error) {
	if err != nil && ctx.Err() == nil {
		r.markBad(i, err)
	}
}
