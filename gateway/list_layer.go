package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/metadata"
)

// Listing merges the sorted listings of every live shard server. Each key
// lives on n servers, so the same key arrives several times, maybe in
// different versions: the newest wins, and tombstones hide the key. Common
// prefixes (with a delimiter) arrive the same way and are deduplicated.

// skipPast is appended to a common prefix to seek past every key under it:
// 0xff never occurs in UTF-8, so prefix+"\xff" sorts after all of them.
const skipPast = "\xff"

type listParams struct {
	Bucket, Prefix, Delimiter string
	After                     string // return names strictly after this
	Max                       int
	// Versions lists every visible version of each key
	// (ListObjectVersions of a versioned bucket): an entry is the key's
	// newest version with the older ones in Previous, newest first (see
	// visibleVersions), and keys whose newest version is a delete marker
	// are listed too.
	Versions bool
}

type listResult struct {
	Objects   []metadata.ListEntry
	Prefixes  []string
	Truncated bool
	Last      string // name of the last entry returned (key or prefix)
}

// cursor pages through one server's listing.
type cursor struct {
	addr  string
	page  int // entries asked for by the next refill
	buf   []metadata.ListEntry
	more  bool
	after string
	err   error
}

// maxListPage is the most entries one refill asks a server for.
const maxListPage = 1000

func entryName(e metadata.ListEntry) string {
	if e.Prefix != "" {
		return e.Prefix
	}
	return e.Key
}

// refill fetches the cursor's next page. Pages grow: a server whose page
// ran dry before the listing was full was mostly sending entries the merge
// dropped (tombstones, keys the other servers also hold), and a listing
// through many deleted keys (DeleteBucket's emptiness check after a
// recursive delete) would otherwise take one round trip per few entries.
func (l *layer) refill(ctx context.Context, c *cursor, p listParams) {
	entries, truncated, err := l.shards.List(ctx, c.addr, metadata.ListQuery{
		Bucket: p.Bucket, Prefix: p.Prefix, Delimiter: p.Delimiter, After: c.after, Limit: c.page,
	})
	c.page = min(c.page*4, maxListPage)
	if err != nil {
		c.err, c.more, c.buf = err, false, nil
		return
	}
	c.buf, c.more = entries, truncated && len(entries) > 0
	if len(entries) > 0 {
		last := entries[len(entries)-1]
		c.after = entryName(last)
		if last.Prefix != "" {
			c.after += skipPast
		}
	}
}

// firstPage is how many entries the first refill asks each of live
// servers for. A key lives on n of them, so a page of keys takes about
// n/live of its rows from each: asking each for the whole page sent a
// third more rows than the merge used with rs-6-3 on 12 servers, and the
// next page asked for them again. The margin covers the spread (for a
// page of 1,000 there: 751 rows expected, standard deviation 14, margin
// 62); a server that runs dry anyway is asked for more (refill). Common
// prefixes come from every server that holds a key under them, so a
// delimiter listing asks for the whole page.
func (l *layer) firstPage(p listParams, live int) int {
	page := min(max(p.Max+1, 100), maxListPage)
	if p.Delimiter != "" || l.maxN <= 0 || live <= l.maxN {
		return page
	}
	share := (page*l.maxN + live - 1) / live
	return min(page, share+share/16+16)
}

// list returns up to p.Max keys and common prefixes after p.After.
func (l *layer) list(ctx context.Context, p listParams) (listResult, error) {
	ids, addrs := l.liveShards()
	if len(ids) == 0 {
		return listResult{}, fmt.Errorf("%w: no live shard servers", errUnavailable)
	}
	page := l.firstPage(p, len(ids))
	cursors := make([]*cursor, len(ids))
	var g errgroup.Group
	for i, id := range ids {
		c := &cursor{addr: addrs[id], page: page, after: p.After}
		cursors[i] = c
		g.Go(func() error { l.refill(ctx, c, p); return nil })
	}
	g.Wait()

	var res listResult
	failed := 0
	for _, c := range cursors {
		if c.err != nil {
			failed++
		}
	}
	// Every key is on several servers; listing survives a minority of
	// them failing, as reads do.
	if failed*2 >= len(cursors) {
		var errs []error
		for _, c := range cursors {
			errs = append(errs, c.err)
		}
		return res, fmt.Errorf("%w: listing failed on %d of %d servers: %w", errUnavailable, failed, len(cursors), errors.Join(errs...))
	}
	// The servers that failed at the start count for no key; from here on
	// every key is merged from the same servers.
	var live []*cursor
	for _, c := range cursors {
		if c.err == nil {
			live = append(live, c)
		}
	}
	cursors = live
	// Servers that are down or failed count as possible holders of every
	// key: a version they could complete to a write quorum may have been
	// acknowledged, and is listed (see confirmedEntry).
	silent := 0
	for _, m := range l.nodes.Members() {
		if m.Role == cluster.RoleShard && m.HTTP != "" {
			silent++
		}
	}
	silent = max(silent-len(cursors), 0)
	same := make([]metadata.ListEntry, 0, len(cursors))
	for {
		// Refill the cursors that ran dry but have more, in parallel.
		var wg sync.WaitGroup
		for _, c := range cursors {
			if len(c.buf) == 0 && c.more {
				wg.Add(1)
				go func() { defer wg.Done(); l.refill(ctx, c, p) }()
			}
		}
		wg.Wait()
		// NB: a server that fails part-way cannot be left out of the rest
		// of the merge: its copies of the keys after that point would no
		// longer vote, while the servers with entries still buffered
		// would, so a key's newest version (a tombstone) could lose to the
		// older one it replaced and a deleted key come back; and when the
		// deadline passes every cursor that needs a page fails at once.
		// The listing fails instead, and the client retries.
		for _, c := range cursors {
			if c.err != nil {
				return listResult{}, fmt.Errorf("%w: listing failed part-way on %s: %w", errUnavailable, c.addr, c.err)
			}
		}
		name, found := "", false
		for _, c := range cursors {
			if len(c.buf) > 0 && (!found || entryName(c.buf[0]) < name) {
				name, found = entryName(c.buf[0]), true
			}
		}
		if !found {
			return res, nil
		}
		same = same[:0]
		for _, c := range cursors {
			if len(c.buf) > 0 && entryName(c.buf[0]) == name {
				same = append(same, c.buf[0])
				c.buf = c.buf[1:]
			}
		}
		var best metadata.ListEntry
		var ok bool
		if p.Versions && same[0].Prefix == "" {
			best, ok = l.visibleVersions(same, silent)
		} else if best, ok = l.confirmedEntry(same, silent); ok && best.Prefix == "" && best.Deleted {
			continue
		}
		if !ok {
			continue
		}
		if len(res.Objects)+len(res.Prefixes) == p.Max {
			res.Truncated = true
			return res, nil
		}
		if best.Prefix != "" {
			res.Prefixes = append(res.Prefixes, best.Prefix)
		} else {
			res.Objects = append(res.Objects, best)
		}
		res.Last = name
	}
}

// confirmedEntry picks, among the copies of one name from several servers,
// the newest version that may be visible (see decide): one that at least k
// servers hold (as reads do, counting previous versions as votes too), or
// that silent servers (down, or failed at the start of the listing) could
// complete to k. A write that provably failed to reach
// quorum is not listed and does not hide the version it failed to
// replace; an acknowledged object whose servers are down does not vanish
// from the listing (its GET answers 503 until they return). Common
// prefixes need no vote.
//
// It runs once per listed name and allocates nothing: votes are counted
// only for a copy newer than the best so far, so copies that agree (the
// common case) cost one count.
func (l *layer) confirmedEntry(same []metadata.ListEntry, silent int) (metadata.ListEntry, bool) {
	if same[0].Prefix != "" {
		return same[0], true
	}
	var best metadata.ListEntry
	found := false
	for _, e := range same {
		if (!found || best.Version.Less(e.Version)) && votes(same, e.Version) >= l.listNeed(e.Code, silent) {
			best, found = e, true
		}
		for _, p := range e.Previous {
			if (!found || best.Version.Less(p.Version)) && votes(same, p.Version) >= l.listNeed(p.Code, silent) {
				p.Key = e.Key
				best, found = p, true
			}
		}
	}
	return best, found
}

// votes counts the copies of version v among same and their previous
// versions.
func votes(same []metadata.ListEntry, v metadata.Version) int {
	n := 0
	for _, e := range same {
		if e.Version == v {
			n++
		}
		for _, p := range e.Previous {
			if p.Version == v {
				n++
			}
		}
	}
	return n
}

// listNeed is how many copies make a version of code listable while
// silent servers did not answer: k less the silent ones, at least one (a
// version with no or an unknown code needs one).
func (l *layer) listNeed(code string, silent int) int {
	if code == "" {
		return 1
	}
	c, err := l.code(code)
	if err != nil {
		return 1
	}
	return max(c.DataShards()-silent, 1)
}
