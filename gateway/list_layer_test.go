package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

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
	es := s.entries[addr]
	for i := 0; i < len(es); i++ {
		e := es[i]
		if e.Key <= q.After || !strings.HasPrefix(e.Key, q.Prefix) {
			continue
		}
		if q.Delimiter != "" {
			// As metadata.Store.List: a common prefix for the keys under
			// it when one of them is live here (unsure when none is but a
			// tombstone has versions under it), then past them all.
			if j := strings.Index(e.Key[len(q.Prefix):], q.Delimiter); j >= 0 {
				cp := e.Key[:len(q.Prefix)+j+len(q.Delimiter)]
				live, unsure := false, false
				for ; i < len(es) && strings.HasPrefix(es[i].Key, cp); i++ {
					live = live || !es[i].Deleted
					unsure = unsure || es[i].Deleted && len(es[i].Previous) > 0
				}
				i--
				if cp <= q.After || !live && !(unsure && q.Unsure) {
					continue
				}
				e = metadata.ListEntry{Prefix: cp, Deleted: !live}
			}
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
	shards.calls = map[string]int{}
	return &layer{shards: shards, nodes: liveShards(n, "s%02d")}
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

// tree puts keys on 9 of 12 servers by their rendezvous order: files
// spread over 50 folders, and a few top-level files when files is set.
func tree(folders, perFolder int, files bool) map[string][]metadata.ListEntry {
	var keys []string
	for f := range folders {
		for i := range perFolder {
			keys = append(keys, fmt.Sprintf("top/f%03d/o%04d", f, i))
		}
		if files {
			keys = append(keys, fmt.Sprintf("top/f%03d.txt", f))
		}
	}
	return placed(keys, 12)
}

// placed puts each key on the first 9 of its rendezvous order over
// servers s00.. (rs-6-3).
func placed(keys []string, n int) map[string][]metadata.ListEntry {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("s%02d", i))
	}
	out := map[string][]metadata.ListEntry{}
	for _, key := range keys {
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

// names lists every page of p and returns the names in order and the
// calls the pages cost.
func names(t *testing.T, l *layer, shards *listShards, p listParams) (out []string, calls []int) {
	t.Helper()
	shards.callsAndRows()
	for {
		res, err := l.list(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := shards.callsAndRows()
		calls = append(calls, n)
		var page []string
		for _, e := range res.Objects {
			page = append(page, e.Key)
		}
		page = append(page, res.Prefixes...)
		sort.Strings(page)
		out = append(out, page...)
		if !res.Truncated {
			return out, calls
		}
		p.After = res.Last
	}
}

// A delimiter page of folders asks known-k+1 servers (7 of 12 with
// rs-6-3), not all of them, and lists every folder.
func TestListDelimiterAsksASubset(t *testing.T) {
	shards := &listShards{entries: tree(50, 100, false)}
	l := listLayer(12, shards)
	l.maxN, l.minK, l.maxK = 9, 6, 6
	got, calls := names(t, l, shards, listParams{Bucket: "b", Prefix: "top/", Delimiter: "/", Max: 1000})
	if len(got) != 50 || got[0] != "top/f000/" || got[49] != "top/f049/" {
		t.Fatalf("listed %d names %v, want the 50 folders", len(got), got)
	}
	if len(calls) != 1 || calls[0] != 7 {
		t.Fatalf("calls per page %v, want one page of 7 calls", calls)
	}
	// Pages of 20: the same folders, 7 calls a page.
	got2, calls := names(t, l, shards, listParams{Bucket: "b", Prefix: "top/", Delimiter: "/", Max: 20})
	if !slices.Equal(got, got2) {
		t.Fatalf("pages of 20 listed %v, want %v", got2, got)
	}
	if !slices.Equal(calls, []int{7, 7, 7}) {
		t.Fatalf("calls per page %v, want 7 for each of 3 pages", calls)
	}
}

// Where the page reaches a key, the other servers are asked too and the
// page is what a listing of every server gives.
func TestListDelimiterWithKeysAsksEveryServer(t *testing.T) {
	entries := tree(50, 20, true)
	for _, max := range []int{1000, 7} {
		shards := &listShards{entries: entries}
		full := listLayer(12, shards) // minK unknown: every server, always
		want, _ := names(t, full, shards, listParams{Bucket: "b", Prefix: "top/", Delimiter: "/", Max: max})
		if len(want) != 100 {
			t.Fatalf("full listing: %d names, want 50 folders and 50 files", len(want))
		}
		l := listLayer(12, shards)
		l.maxN, l.minK, l.maxK = 9, 6, 6
		got, calls := names(t, l, shards, listParams{Bucket: "b", Prefix: "top/", Delimiter: "/", Max: max})
		if !slices.Equal(got, want) {
			t.Fatalf("max %d: listed %v, want %v", max, got, want)
		}
		for i, n := range calls {
			if n != 12 {
				t.Errorf("max %d: page %d cost %d calls, want 12 (7, then the other 5 at its first key)", max, i, n)
			}
		}
	}
}

// A deleted key met on the subset still needs every server's vote: the
// servers its tombstone missed (s07, s08) must not bring it back.
func TestListDelimiterHidesDeletedKeys(t *testing.T) {
	shards := &listShards{entries: deletedKeys(30)}
	l := listLayer(12, shards)
	l.maxN, l.minK, l.maxK = 9, 6, 6
	got, _ := names(t, l, shards, listParams{Bucket: "b", Prefix: "tree/", Delimiter: "/", Max: 1000})
	if len(got) != 0 {
		t.Fatalf("listed %v, want nothing (every key deleted)", got)
	}
}

// With too few live servers for a subset that meets every k holders, a
// delimiter listing asks every live server.
func TestListDelimiterSubsetNeedsEnoughLive(t *testing.T) {
	for _, tc := range []struct{ known, live, want int }{
		{12, 12, 7}, {12, 8, 7}, {12, 7, 0}, {9, 9, 4}, {9, 6, 4}, {9, 4, 0}, {6, 6, 1},
	} {
		l := &layer{minK: 6}
		if got := l.listSubset(listParams{Delimiter: "/"}, tc.known, tc.live); got != tc.want {
			t.Errorf("known %d, live %d: subset %d, want %d", tc.known, tc.live, got, tc.want)
		}
		if got := l.listSubset(listParams{}, tc.known, tc.live); got != 0 {
			t.Errorf("recursive listing: subset %d, want 0 (every server)", got)
		}
	}
}

// A server of the subset that fails at the start sends the page to every
// server, and its listing is complete.
func TestListDelimiterSubsetServerFails(t *testing.T) {
	entries := tree(50, 20, false)
	shards := &listShards{entries: entries}
	l := listLayer(12, shards)
	l.maxN, l.minK, l.maxK = 9, 6, 6
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%02d", i)
	}
	first := placement.Order("list/b/top/", ids)
	shards.failFrom = map[string]int{first[0]: 0, first[1]: 0}
	got, calls := names(t, l, shards, listParams{Bucket: "b", Prefix: "top/", Delimiter: "/", Max: 1000})
	if len(got) != 50 {
		t.Fatalf("listed %d names, want 50 folders", len(got))
	}
	if calls[0] != 12 {
		t.Fatalf("%d calls, want 12 (the subset, then the other 5)", calls[0])
	}
}

// A folder whose only key has an acknowledged version on 9 servers, 4 of
// them in the listing's subset, and a delete that failed (on those 4,
// fewer than k) over it, is listed: the subset's servers name the folder
// only unsure, and the page asks every server. Without unsure prefixes
// the subset would name nothing and the folder would vanish.
func TestListDelimiterUnsureFolder(t *testing.T) {
	var ids []string
	for i := range 12 {
		ids = append(ids, fmt.Sprintf("s%02d", i))
	}
	order := placement.Order("list/b/top/", ids)
	subset, others := order[:7], order[7:]
	v := metadata.ListEntry{Key: "top/dir/a", Version: metadata.Version{TS: 100, Writer: "gw"}, Code: "rs-6-3"}
	tomb := metadata.ListEntry{Key: "top/dir/a", Version: metadata.Version{TS: 200, Writer: "gw"}, Deleted: true, Code: "rs-6-3",
		Previous: []metadata.ListEntry{v}}
	entries := map[string][]metadata.ListEntry{}
	for _, id := range subset[:4] {
		entries[id] = []metadata.ListEntry{tomb}
	}
	for _, id := range others {
		entries[id] = []metadata.ListEntry{v}
	}
	shards := &listShards{entries: entries}
	l := listLayer(12, shards)
	l.maxN, l.minK, l.maxK = 9, 6, 6
	got, calls := names(t, l, shards, listParams{Bucket: "b", Prefix: "top/", Delimiter: "/", Max: 1000})
	if !slices.Equal(got, []string{"top/dir/"}) {
		t.Fatalf("listed %v, want top/dir/", got)
	}
	if calls[0] != 12 {
		t.Fatalf("%d calls, want 12 (the subset, then the others for the unsure folder)", calls[0])
	}
}
