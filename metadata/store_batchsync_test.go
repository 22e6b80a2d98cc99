package metadata

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncFS counts the syncs of pebble's log files (*.log): how many fsyncs
// a store operation costs.
type syncFS struct {
	vfs.FS
	syncs atomic.Int64
}

type syncFile struct {
	vfs.File
	n *atomic.Int64
}

func (f syncFile) Sync() error     { f.n.Add(1); return f.File.Sync() }
func (f syncFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }
func (f syncFile) SyncTo(length int64) (bool, error) {
	f.n.Add(1)
	return f.File.SyncTo(length)
}

func (fs *syncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return syncFile{File: f, n: &fs.syncs}, nil
}

func (fs *syncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *syncFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, name, c)
	return fs.wrap(name, f, err)
}

func (fs *syncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

// TestRemoveTombstonesSyncsOnce: a batch of removals costs one sync, not
// one per tombstone, and judges each tombstone as RemoveTombstone does.
func TestRemoveTombstonesSyncsOnce(t *testing.T) {
	ctx := context.Background()
	fs := &syncFS{FS: vfs.NewMem()}
	s := openMem(t, fs, "n1")
	const n = 40
	var refs []TombstoneRef
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		if _, err := s.PutManifest(ctx, tomb("b", key, 2)); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, TombstoneRef{Key: key, Version: ver(2)})
	}
	// Not removed: an object under a tombstone, another version, no key.
	for _, m := range []*Manifest{obj("b", "under", 1, nodes3, "p1"), tomb("b", "under", 2), tomb("b", "other", 3)} {
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	refs = append(refs, TombstoneRef{"under", ver(2)}, TombstoneRef{"other", ver(2)}, TombstoneRef{"none", ver(2)})

	before := fs.syncs.Load()
	removed, err := s.RemoveTombstones(ctx, "b", refs)
	if err != nil {
		t.Fatal(err)
	}
	if syncs := fs.syncs.Load() - before; syncs < 1 || syncs > 2 {
		t.Fatalf("%d syncs for %d removals, want 1 (at most 2)", syncs, len(refs))
	}
	for i, r := range refs {
		if want := i < n; removed[i] != want {
			t.Fatalf("%s removed = %v, want %v", r.Key, removed[i], want)
		}
	}
	for _, key := range []string{"k00", "k39"} {
		if got := renderVersions(t, s, "b", key); got != "-" {
			t.Fatalf("%s after removal: %q", key, got)
		}
	}
	if got := renderVersions(t, s, "b", "under"); got != "2~ | 1" {
		t.Fatalf("under after removal: %q", got)
	}
	if st, _ := s.Stats(ctx); st.TombstonesCollected != n {
		t.Fatalf("TombstonesCollected = %d, want %d", st.TombstonesCollected, n)
	}
}

// TestDoneConfirmsOneSync: the drops of a round of confirm jobs and the
// round's end (removals and retries) cost one sync in all, and the
// retries stay queued.
func TestDoneConfirmsOneSync(t *testing.T) {
	ctx := context.Background()
	fs := &syncFS{FS: vfs.NewMem()}
	s := openMem(t, fs, "n1")
	t0 := time.Unix(1_000_000, 0)
	const n = 30
	var jobs []ConfirmJob
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		for _, m := range []*Manifest{obj("b", key, 1, nodes3, "p"+key), tomb("b", key, 2)} {
			if _, err := s.PutManifest(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		j := ConfirmJob{Bucket: "b", Key: key, Version: ver(2), Since: t0, Due: t0.Add(time.Minute)}
		if err := s.EnqueueConfirm(ctx, j); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	before := fs.syncs.Load()
	for _, j := range jobs[:n-1] {
		dropped, err := s.DropPreviousNoSync(ctx, j.Bucket, j.Key, j.Version, nil)
		if err != nil || len(dropped) != 1 {
			t.Fatalf("drop %s: %d dropped, %v", j.Key, len(dropped), err)
		}
	}
	retry := jobs[n-1]
	retry.Due = t0.Add(2 * time.Minute)
	if err := s.DoneConfirms(ctx, jobs, []ConfirmJob{retry}); err != nil {
		t.Fatal(err)
	}
	if syncs := fs.syncs.Load() - before; syncs < 1 || syncs > 2 {
		t.Fatalf("%d syncs for a round of %d jobs, want 1 (at most 2)", syncs, n)
	}
	if got := renderVersions(t, s, "b", "k00"); got != "2~ |" {
		t.Fatalf("k00 after its drop: %q", got)
	}
	due, err := s.DueConfirms(ctx, t0.Add(time.Hour), 100)
	if err != nil || len(due) != 1 || due[0].Key != retry.Key || !due[0].Due.Equal(retry.Due) {
		t.Fatalf("queue after the round: %+v, %v; want the retry of %s only", due, err, retry.Key)
	}
	// A retry under its own job's key (due at once) stays queued.
	if err := s.DoneConfirms(ctx, due, due); err != nil {
		t.Fatal(err)
	}
	if again, err := s.DueConfirms(ctx, t0.Add(time.Hour), 100); err != nil || len(again) != 1 {
		t.Fatalf("queue after a same-key retry: %+v, %v", again, err)
	}
}
