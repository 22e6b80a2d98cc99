package gateway

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/placement"
	"github.com/regen-s3/regen/metadata"
)

// listShards is a ShardAPI whose servers answer List from fixed entries
// (sorted by key); a server in failFrom fails every List call after its
// first failFrom ones. Other calls panic (nil embedded interface).
type listShards struct {
	ShardAPI
	entries  map[string][]metadata.ListEntry // by server address
	failFrom map[string]int

	mu    sync.Mutex
	calls map[string]int
	rows  int // entries answered, all servers
}

func (s *listShards) List(ctx context.Context, addr string, q metadata.ListQuery) ([]metadata.ListEntry, bool, error) {
	s.mu.Lock()
	s.calls[addr]++
	n := s.calls[addr]
	s.mu.Unlock()
	if f, ok := s.failFrom[addr]; ok && n > f {
		return nil, false, fmt.Errorf("%s: %w", addr, context.DeadlineExceeded)
	}
	var out []metadata.ListEntry
	for _, e := range s.entries[addr] {
		if e.Key <= q.After || !strings.HasPrefix(e.Key, q.Prefix) {
			continue
		}
		if len(out) == q.Limit {
			s.count(len(out))
			return out, true, nil
		}
		out = append(out, e)
	}
	s.count(len(out))
	return out, false, nil
}

func (s *listShards) count(rows int) {
	s.mu.Lock()
	s.rows += rows
	s.mu.Unlock()
}

// callsAndRows returns the calls and rows answered so far and starts
// counting again.
func (s *listShards) callsAndRows() (calls, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.calls {
		calls += n
	}
	rows = s.rows
	clear(s.calls)
	s.rows = 0
	return calls, rows
}

// listLayer is a layer over n shard servers s00.. answering from shards.
func listLayer(n int, shards *listShards) *layer {
	var members fakeMembers
	for i := range n {
		id := fmt.Sprintf("s%02d", i)
		members = append(members, cluster.Member{ID: id, State: cluster.StateAlive, Meta: cluster.Meta{Role: cluster.RoleShard, HTTP: id}})
	}
	shards.calls = map[string]int{}
	return &layer{shards: shards, nodes: members}
}

// deletedKeys builds the servers' entries after keys were put on servers
// s00..s08 (an rs-6-3 placement) and deleted while s07 and s08 were
// flapping: the tombstone reached the write quorum s00..s06 (where the
// object it replaced stays a previous version until confirmed), s07 and
// s08 still hold the object.
func deletedKeys(keys int) map[string][]metadata.ListEntry {
	obj := metadata.Version{TS: 100, Writer: "gw"}
	tomb := metadata.Version{TS: 200, Writer: "gw"}
	out := map[string][]metadata.ListEntry{}
	for i := range keys {
		key := fmt.Sprintf("tree/file %05d", i)
		live := metadata.ListEntry{Key: key, Version: obj, Size: 1, Code: "rs-6-3"}
		for s := range 9 {
			addr := fmt.Sprintf("s%02d", s)
			e := live
			if s < 7 {
				e = metadata.ListEntry{Key: key, Version: tomb, Deleted: true, Code: "rs-6-3", Previous: []metadata.ListEntry{live}}
			}
			out[addr] = append(out[addr], e)
		}
	}
	for _, es := range out {
		sort.Slice(es, func(i, j int) bool { return es[i].Key < es[j].Key })
	}
	return out
}

func TestListHidesDeletedKeys(t *testing.T) {
	shards := &listShards{entries: deletedKeys(3000)}
	l := listLayer(12, shards)
	res, err := l.list(context.Background(), listParams{Bucket: "b", Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 0 || res.Truncated {
		t.Fatalf("listed %d deleted keys (truncated %v), want none", len(res.Objects), res.Truncated)
	}
	// DeleteBucket's emptiness check reads past every tombstone; pages
	// grow, so that takes a few round trips per server, not one per 100.
	for addr, n := range shards.calls {
		if n > 6 {
			t.Errorf("server %s answered %d list calls for 3000 tombstones", addr, n)
		}
	}
}

// A server that fails part-way (here: its context's deadline passed) must
// fail the listing. Left out of the merge from there on, its tombstones
// stop voting while s07 and s08 still vote for the object they replaced,
// and a deleted key comes back: DeleteBucket answered BucketNotEmpty after
// `s3cmd del --recursive` had deleted every key.
func TestListFailsWhenAServerFailsPartWay(t *testing.T) {
	shards := &listShards{entries: deletedKeys(3000), failFrom: map[string]int{"s00": 1, "s01": 1}}
	l := listLayer(12, shards)
	res, err := l.list(context.Background(), listParams{Bucket: "b", Max: 1})
	if err == nil {
		t.Fatalf("listing succeeded with %d keys %v; want an error", len(res.Objects), res.Objects)
	}
	if !errors.Is(err, errUnavailable) {
		t.Fatalf("error %v, want errUnavailable (SlowDown)", err)
	}
}

// Servers that fail from the start are left out of every key alike: a
// minority of them does not fail the listing.
func TestListToleratesServersFailingFromTheStart(t *testing.T) {
	entries := deletedKeys(10)
	entries["s00"] = append(entries["s00"], metadata.ListEntry{Key: "z", Version: metadata.Version{TS: 1, Writer: "gw"}})
	for _, s := range []string{"s01", "s02", "s03", "s04", "s05", "s06", "s07"} {
		entries[s] = append(entries[s], metadata.ListEntry{Key: "z", Version: metadata.Version{TS: 1, Writer: "gw"}})
	}
	shards := &listShards{entries: entries, failFrom: map[string]int{"s10": 0, "s11": 0}}
	l := listLayer(12, shards)
	res, err := l.list(context.Background(), listParams{Bucket: "b", Max: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 || res.Objects[0].Key != "z" {
		t.Fatalf("listed %v, want only z", res.Objects)
	}
}

// placedKeys puts keys on 9 of the servers s00..s(n-1) each (rs-6-3), by
// the key's rendezvous order, as a gateway places them.
func placedKeys(keys, n int) map[string][]metadata.ListEntry {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("s%02d", i))
	}
	out := map[string][]metadata.ListEntry{}
	for i := range keys {
		key := fmt.Sprintf("meta/p%03d/o%05d", i%100, i)
		e := metadata.ListEntry{Key: key, Version: metadata.Version{TS: 100, Writer: "gw"}, Size: 1, Code: "rs-6-3"}
		for _, addr := range placement.Order("b/"+key, ids)[:9] {
			out[addr] = append(out[addr], e)
		}
	}
	for _, es := range out {
		sort.Slice(es, func(i, j int) bool { return es[i].Key < es[j].Key })
	}
	return out
}

// A recursive listing page costs one call per server and about the rows
// the merge uses: each server holds 9/12 of the keys, so asking each for
// a whole page sent a third more rows than listed (12 per listed key
// instead of 9), and asked for them again with the next page.
func TestListPageAsksForItsShare(t *testing.T) {
	const keys, servers = 5000, 12
	shards := &listShards{entries: placedKeys(keys, servers)}
	l := listLayer(servers, shards)
	l.maxN, l.minK, l.maxK = 9, 6, 6
	after, listed, pages := "", 0, 0
	for {
		res, err := l.list(context.Background(), listParams{Bucket: "b", After: after, Max: 1000})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		listed += len(res.Objects)
		calls, rows := shards.callsAndRows()
		if calls != servers {
			t.Errorf("page %d: %d list calls, want one per server (%d)", pages, calls, servers)
		}
		if per := float64(rows) / float64(max(len(res.Objects), 1)); per > 10 {
			t.Errorf("page %d: %d rows for %d keys (%.1f a key), want at most 10 (9 copies of each)", pages, rows, len(res.Objects), per)
		}
		if !res.Truncated {
			break
		}
		after = res.Last
	}
	if listed != keys || pages != keys/1000 {
		t.Fatalf("listed %d keys in %d pages, want %d in %d", listed, pages, keys, keys/1000)
	}
}

// BenchmarkListMerge merges one page of 1,000 keys from 12 servers (the
// fake servers answer from memory: what is measured is the gateway's
// merge, plus the fake's slices).
func BenchmarkListMerge(b *testing.B) {
	shards := &listShards{entries: placedKeys(1000, 12)}
	l := listLayer(12, shards)
	l.maxN, l.minK, l.maxK = 9, 6, 6
	b.ReportAllocs()
	for b.Loop() {
		res, err := l.list(context.Background(), listParams{Bucket: "b", Max: 1000})
		if err != nil || len(res.Objects) != 1000 {
			b.Fatal(len(res.Objects), err)
		}
	}
}
