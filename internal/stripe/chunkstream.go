package stripe

import (
	"errors"
	"io"
	"sync"
)

// errConsumerGone is what a chunk write returns once the request that
// carried the stream has ended (failed, or the server answered early).
var errConsumerGone = errors.New("stripe: shard request ended before its body")

// chunkStream is a shard PUT's request body: the sender hands it its
// shard's chunk of each stripe, one at a time, and waits until the chunk
// is consumed. Its WriteTo, which net/http's transport uses to send a
// body, writes each chunk from the stripe buffer straight into the
// connection; io.Pipe instead copied every byte into the transport's
// 32 KiB buffer and woke both sides for each piece. Read serves consumers
// that read (a body wrapped on its way); it copies, like a pipe.
type chunkStream struct {
	ch   chan []byte   // chunks from the sender; closed by finish
	ack  chan struct{} // a chunk handed over has been consumed
	done chan struct{} // the consumer stopped: Close, or WriteTo returned
	once sync.Once

	mu  sync.Mutex
	err error // the sender's reason to end the body early (finish)

	cur []byte // Read's rest of the current chunk
}

func newChunkStream() *chunkStream {
	return &chunkStream{ch: make(chan []byte), ack: make(chan struct{}, 1), done: make(chan struct{})}
}

// write hands p to the consumer and waits until it is consumed. It never
// returns while the consumer may still read p, so p's buffer can be given
// back as soon as it returns: a consumer that was cancelled (its
// connection closed) fails its write at once.
func (c *chunkStream) write(p []byte) error {
	select {
	case c.ch <- p:
	case <-c.done:
		return errConsumerGone
	}
	select {
	case <-c.ack:
		return nil
	case <-c.done:
		return errConsumerGone
	}
}

// finish ends the body after the last chunk: cleanly for a nil err; with
// err otherwise, so the request is aborted and the server commits nothing.
func (c *chunkStream) finish(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.ch)
}

func (c *chunkStream) endErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// WriteTo writes every chunk to w as it comes, until finish.
func (c *chunkStream) WriteTo(w io.Writer) (int64, error) {
	defer c.Close()
	var n int64
	for p := range c.ch {
		m, err := w.Write(p)
		n += int64(m)
		if err != nil {
			return n, err
		}
		c.ack <- struct{}{}
	}
	return n, c.endErr()
}

func (c *chunkStream) Read(p []byte) (int, error) {
	if len(c.cur) == 0 {
		chunk, ok := <-c.ch
		if !ok {
			c.Close()
			if err := c.endErr(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
		c.cur = chunk
		if len(chunk) == 0 {
			c.ack <- struct{}{}
			return 0, nil
		}
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	if len(c.cur) == 0 {
		c.ack <- struct{}{}
	}
	return n, nil
}

// Close tells the sender that nothing more will be consumed.
func (c *chunkStream) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}
