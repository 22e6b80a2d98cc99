package s3bench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Workload groups. A run does the selected ones in this order: for each
// size, put then get (head after the smallest size's get); then the
// listing set is loaded and listed, and finally deleted by DeleteObjects.
const (
	Put    = "put"
	Get    = "get"
	Head   = "head"
	List   = "list"
	Delete = "delete"
)

// AllWorkloads is every workload group, in run order.
var AllWorkloads = []string{Put, Get, Head, List, Delete}

// Config configures a run. Zero fields take the defaults of
// DefaultConfig where it says so.
type Config struct {
	// Bucket is where the run works. Empty: a new bucket
	// regen-bench-<random>, removed at the end. A bucket that exists
	// must be empty; it is left in place, emptied of what the run wrote.
	Bucket string
	// Workloads are the groups to run (a subset of AllWorkloads).
	Workloads []string
	// Sizes are the object sizes of PUT and GET (default 4 KiB, 1 MiB,
	// 64 MiB: small objects, one stripe, many stripes). HEAD uses the
	// first.
	Sizes []int64
	// Concurrency of PUT and GET; 0 picks by size what the project's
	// issues measured: 16 up to 64 KiB, 8 up to 16 MiB, 4 above.
	Concurrency int
	// HeadConcurrency of HEAD (default 16, as for small objects).
	HeadConcurrency int
	// Duration bounds each workload (ops still running at the end
	// finish and count); 0: no time bound.
	Duration time.Duration
	// Count bounds each PUT, GET and HEAD workload in ops and each
	// listing workload in listings; 0: no count bound. At least one of
	// Duration and Count must be set.
	Count int
	// MetaObjects of MetaSize bytes in MetaPrefixes prefixes make the set
	// that is listed and then removed by DeleteObjects (default 5000 of
	// 1 KiB in 50, as the metadata issue measured).
	MetaObjects  int
	MetaPrefixes int
	MetaSize     int64
	// MetaConcurrency loads the listing set (default 16).
	MetaConcurrency int
	// PartSize is the client's multipart part size; 0 keeps the client's
	// default (minio-go: objects above 16 MiB go in 16 MiB parts, four at
	// a time).
	PartSize uint64

	// OnResult, if set, is called with each workload's result as it ends.
	OnResult func(Result)
	// OnProgress, if set, is called a few times a second while a
	// workload (or the loading of its objects) runs.
	OnProgress func(Progress)
}

// Progress is the state of the running workload.
type Progress struct {
	Workload string
	Ops      int64
	Errors   int64
	Bytes    int64
	Items    int64
	Elapsed  time.Duration
	// Total is the op count bound (0: bounded by Duration only).
	Total    int64
	Duration time.Duration
}

// DefaultConfig returns the defaults: every workload, 4 KiB, 1 MiB and
// 64 MiB objects, 10 s per workload.
func DefaultConfig() Config {
	return Config{
		Workloads:       slices.Clone(AllWorkloads),
		Sizes:           []int64{4 << 10, 1 << 20, 64 << 20},
		HeadConcurrency: 16,
		Duration:        10 * time.Second,
		MetaObjects:     5000,
		MetaPrefixes:    50,
		MetaSize:        1 << 10,
		MetaConcurrency: 16,
	}
}

// Validate checks the config.
func (c Config) Validate() error {
	if len(c.Workloads) == 0 {
		return errors.New("s3bench: no workloads")
	}
	for _, w := range c.Workloads {
		if !slices.Contains(AllWorkloads, w) {
			return fmt.Errorf("s3bench: unknown workload %q (want %v)", w, AllWorkloads)
		}
	}
	if c.Duration <= 0 && c.Count <= 0 {
		return errors.New("s3bench: set a duration or a count (or both)")
	}
	if c.Duration < 0 || c.Count < 0 || c.Concurrency < 0 {
		return errors.New("s3bench: negative duration, count or concurrency")
	}
	if c.has(Put) || c.has(Get) || c.has(Head) {
		if len(c.Sizes) == 0 {
			return errors.New("s3bench: put, get and head need at least one object size")
		}
		for _, s := range c.Sizes {
			if s <= 0 {
				return fmt.Errorf("s3bench: object size %d must be positive", s)
			}
		}
	}
	if c.HeadConcurrency < 1 || c.MetaConcurrency < 1 {
		return errors.New("s3bench: head and load concurrency must be at least 1")
	}
	if c.has(List) || c.has(Delete) {
		if c.MetaObjects < 1 || c.MetaPrefixes < 1 || c.MetaPrefixes > c.MetaObjects || c.MetaSize < 0 {
			return fmt.Errorf("s3bench: listing set of %d objects in %d prefixes", c.MetaObjects, c.MetaPrefixes)
		}
	}
	if c.PartSize != 0 && c.PartSize < 5<<20 {
		return fmt.Errorf("s3bench: part size %d below S3's 5 MiB minimum", c.PartSize)
	}
	return nil
}

func (c Config) has(w string) bool { return slices.Contains(c.Workloads, w) }

// concurrency is the PUT/GET concurrency for objects of size bytes.
func (c Config) concurrency(size int64) int {
	switch {
	case c.Concurrency > 0:
		return c.Concurrency
	case size <= 64<<10:
		return 16
	case size <= 16<<20:
		return 8
	}
	return 4
}

// SizeName writes a size the way workload names carry it: 4KiB, 1MiB,
// 64MiB, or bytes when it is not a whole number of KiB.
func SizeName(n int64) string {
	for _, u := range []struct {
		name string
		b    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.b && n%u.b == 0 {
			return strconv.FormatInt(n/u.b, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
