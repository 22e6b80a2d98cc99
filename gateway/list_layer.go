package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/placement"
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
		Unsure: p.Delimiter != "",
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

// listSubset is how many live servers a delimiter listing asks first:
// enough to meet every k holders of any version, known holding servers
// counted dead or alive, or 0 when the live servers are too few for that
// (or the codes are unknown) and every one is asked. See list.
func (l *layer) listSubset(p listParams, known, live int) int {
	if p.Delimiter == "" || l.minK <= 0 {
		return 0
	}
	need := known - l.minK + 1
	if need < 1 || need >= live {
		return 0
	}
	return need
}

// list returns up to p.Max keys and common prefixes after p.After.
//
// A delimiter listing first asks only listSubset of the live servers
// (known-k+1, k the smallest of the codes: 7 of 12 with rs-6-3), and the
// others only once the merge reaches a name those do not settle. Common
// prefixes need no vote: a server names one when it holds a live key
// under it. A key whose live version may be visible has k holders, and
// the subset meets every k servers, dead or alive; each holder in it
// still has that version, current (it names the prefix live) or under a
// newer tombstone not yet confirmed on a write quorum (it names the
// prefix unsure, metadata.ListQuery.Unsure). So a prefix that no server
// of the subset names has no key whose live version may be visible, and
// leaving it out is what its keys' vote rule would do. Keys need their
// votes from every server, and an unsure prefix needs every server's
// word: at the first of either, the other servers are asked from the
// last name listed on, and the page goes on as a full listing. A page of
// common prefixes (a tree of folders) so costs known-k+1 calls instead
// of one per server; a page that reaches a key costs every server, as
// before.
func (l *layer) list(ctx context.Context, p listParams) (listResult, error) {
	ids, addrs := l.liveShards()
	if len(ids) == 0 {
		return listResult{}, fmt.Errorf("%w: no live shard servers", errUnavailable)
	}
	known := 0
	for _, m := range l.nodes.Members() {
		if m.Role == cluster.RoleShard && m.HTTP != "" {
			known++
		}
	}
	page := l.firstPage(p, len(ids))
	var rest []string
	if n := l.listSubset(p, known, len(ids)); n > 0 {
		// The first servers of the listing's own rendezvous order: the
		// same servers for the same folder while membership holds (so a
		// folder listed twice gets the same answer), different ones for
		// different folders.
		ids = placement.Order("list/"+p.Bucket+"/"+p.Prefix, ids)
		ids, rest = ids[:n], ids[n:]
	}
	m := &merge{l: l, p: p}
	m.open(ctx, ids, addrs, page, p.After)
	if len(m.failed) > 0 && len(rest) > 0 {
		// A server of the subset failed: every server is needed.
		m.open(ctx, rest, addrs, page, p.After)
		rest = nil
	}
	if err := m.check(); err != nil {
		return listResult{}, err
	}
	var res listResult
	for {
		// Refill the cursors that ran dry but have more, in parallel.
		var wg sync.WaitGroup
		for _, c := range m.cursors {
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
		for _, c := range m.cursors {
			if c.err != nil {
				return listResult{}, fmt.Errorf("%w: listing failed part-way on %s: %w", errUnavailable, c.addr, c.err)
			}
		}
		// The next name, whether every copy of it is a common prefix, and
		// whether one of those is live (see metadata.ListQuery.Unsure).
		name, prefix, live, found := "", false, false, false
		for _, c := range m.cursors {
			if len(c.buf) == 0 {
				continue
			}
			e := c.buf[0]
			switch n := entryName(e); {
			case !found || n < name:
				name, prefix, live, found = n, e.Prefix != "", e.Prefix != "" && !e.Deleted, true
			case n == name:
				prefix = prefix && e.Prefix != ""
				live = live || e.Prefix != "" && !e.Deleted
			}
		}
		if found && !(prefix && live) && len(rest) > 0 {
			// A key, or a prefix that no server of the subset names live
			// but one names unsure: that needs every server. The others
			// start after the last name listed (everything before it was
			// a common prefix, listed; their entries from there on merge
			// as in a full listing).
			after := p.After
			if res.Last != "" {
				after = res.Last
				if len(res.Prefixes) > 0 && res.Prefixes[len(res.Prefixes)-1] == res.Last {
					after += skipPast
				}
			}
			m.open(ctx, rest, addrs, page, after)
			if err := m.check(); err != nil {
				return listResult{}, err
			}
			rest = nil
			continue
		}
		if !found {
			return res, nil
		}
		same := m.same[:0]
		for _, c := range m.cursors {
			if len(c.buf) > 0 && entryName(c.buf[0]) == name {
				same = append(same, c.buf[0])
				c.buf = c.buf[1:]
			}
		}
		m.same = same
		silent := max(known-len(m.cursors), 0)
		var best metadata.ListEntry
		var ok bool
		if prefix {
			if !live {
				continue // no server holds a live key under it
			}
			best, ok = metadata.ListEntry{Prefix: name}, true
		} else if p.Versions && same[0].Prefix == "" {
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

// merge is the state of one listing page: the cursors of the servers
// merged so far.
type merge struct {
	l       *layer
	p       listParams
	cursors []*cursor // servers that answered their first page
	failed  []*cursor // servers whose first page failed
	tried   int       // servers asked
	same    []metadata.ListEntry
}

// open asks ids for their first page after after, in parallel, and adds
// them to the merge. Servers whose first page fails count for no key
// (they are silent; see check).
func (m *merge) open(ctx context.Context, ids []string, addrs map[string]string, page int, after string) {
	fresh := make([]*cursor, len(ids))
	var g errgroup.Group
	for i, id := range ids {
		c := &cursor{addr: addrs[id], page: page, after: after}
		fresh[i] = c
		g.Go(func() error { m.l.refill(ctx, c, m.p); return nil })
	}
	g.Wait()
	for _, c := range fresh {
		if c.err != nil {
			m.failed = append(m.failed, c)
		} else {
			m.cursors = append(m.cursors, c)
		}
	}
	m.tried += len(fresh)
}

// check fails the listing when half the servers asked failed their first
// page: every key is on several servers, and a listing survives a
// minority of them failing, as reads do.
func (m *merge) check() error {
	if len(m.failed)*2 >= m.tried {
		var errs []error
		for _, c := range m.failed {
			errs = append(errs, c.err)
		}
		return fmt.Errorf("%w: listing failed on %d of %d servers: %w", errUnavailable, len(m.failed), m.tried, errors.Join(errs...))
	}
	return nil
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
