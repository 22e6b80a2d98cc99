package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/placement"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/stripe"
	"github.com/regen-s3/regen/metadata"
)

// ShardAPI is what the gateway needs from shard servers.
// *shardrpc.Client implements it.
type ShardAPI interface {
	stripe.Shards
	DeleteShard(ctx context.Context, addr, fileID string, idx int) error
	PutManifestFenced(ctx context.Context, addr string, m *metadata.Manifest, lease string) (shardrpc.PutManifestResponse, error)
	GetManifestVersionsBatch(ctx context.Context, addr, bucket string, keys []string) ([]shardrpc.KeyVersions, error)
	PutManifestsFenced(ctx context.Context, addr string, ms []*metadata.Manifest, lease string) ([]shardrpc.PutResult, error)
	Confirmed(ctx context.Context, addr string, refs []shardrpc.VersionRef) error
	AbortManifest(ctx context.Context, addr, bucket, key string, v metadata.Version) error
	DeleteVersion(ctx context.Context, addr, bucket, key, id, lease string, bypass bool) (int, error)
	GetManifest(ctx context.Context, addr, bucket, key string) (*metadata.Manifest, error)
	GetManifestVersions(ctx context.Context, addr, bucket, key string) (*metadata.Manifest, []*metadata.Manifest, error)
	LookupVersions(ctx context.Context, addr, bucket, key string, inline bool) (shardrpc.ManifestVersionsResponse, error)
	List(ctx context.Context, addr string, q metadata.ListQuery) ([]metadata.ListEntry, bool, error)
	PutBucket(ctx context.Context, addr string, b *metadata.Bucket) error
	PutBucketFenced(ctx context.Context, addr string, b *metadata.Bucket, lease string) error
	ListBuckets(ctx context.Context, addr string) ([]metadata.Bucket, error)

	PutUpload(ctx context.Context, addr string, u *metadata.Upload) error
	GetUpload(ctx context.Context, addr, bucket, key, id string) (*metadata.Upload, error)
	ListUploads(ctx context.Context, addr string, q metadata.UploadQuery) ([]metadata.Upload, bool, error)
	PutUploadPart(ctx context.Context, addr, bucket, key string, p *metadata.UploadPart) (*metadata.UploadPart, error)
	ListUploadParts(ctx context.Context, addr, id string) ([]metadata.UploadPart, error)
	FinishUpload(ctx context.Context, addr string, r shardrpc.FinishRequest) error
	AcquireLease(ctx context.Context, addr, name, holder string, ttl time.Duration) error
	ReleaseLease(ctx context.Context, addr, name, holder string) error
}

// Membership is what the gateway needs from the cluster.
// *cluster.Node implements it.
type Membership interface {
	Live(role cluster.Role) []cluster.Member
	Members() []cluster.Member
}

// Errors of the object layer; handlers map them to S3 errors.
var (
	errNotFound    = errors.New("not found")
	errUnavailable = errors.New("not enough shard servers answered")
	// errStayed marks a failed manifest write that k servers stored: it
	// is visible (a read may have returned it) and stays, so its data
	// must stay too. Callers must not delete its shard files or parts.
	errStayed = errors.New("the failed write stays: k servers stored it")
	// errNewer: a server holds a newer version than the one written. The
	// write is tried again with a newer version (fenced) unless k servers
	// stored it (errStayed, which is never tried again): counting it as
	// a race it was allowed to lose is wrong when the newer version is a
	// conditional write that checked the key before this one landed
	// (chaos seed 707: an acknowledged PUT lost to an If-Match PUT).
	errNewer = errors.New("a server holds a newer version")
)

// layer is the gateway's view of the shard servers: manifests by quorum,
// bucket records, and the codes in use.
type layer struct {
	shards ShardAPI
	nodes  Membership
	log    *slog.Logger
	clock  clock

	// notify tells servers which writes reached a quorum; nil in tests
	// that need no notices.
	notify *notifier
	// lookups batches the lookups of concurrent requests per server; nil
	// sends each alone.
	lookups *lookups
	// writes batches the manifest writes of concurrent requests per
	// server; nil sends each alone.
	writes *manifestWrites

	codes codec.Cache
	// maxN is the widest stripe among configured codes: the first batch of
	// servers a manifest lookup asks.
	maxN int
	// minK is the smallest k among configured codes: a lookup proves a
	// key absent only when fewer than minK servers of its first batch were
	// silent.
	minK int
	// maxK is the largest k among configured codes: how many servers a
	// lookup asks first. Their answers decide a healthy key of any code
	// (see lookup).
	maxK int
}

func (l *layer) code(name string) (codec.Code, error) { return l.codes.Get(name) }

// liveShards returns the live shard servers' IDs and their addresses.
func (l *layer) liveShards() ([]string, map[string]string) {
	live := l.nodes.Live(cluster.RoleShard)
	ids := make([]string, 0, len(live))
	addrs := make(map[string]string, len(live))
	for _, m := range live {
		if m.HTTP == "" {
			continue
		}
		ids = append(ids, m.ID)
		addrs[m.ID] = m.HTTP
	}
	return ids, addrs
}

// member returns the cluster member with node ID id.
func (l *layer) member(id string) (cluster.Member, bool) {
	for _, m := range l.nodes.Members() {
		if m.ID == id {
			return m, true
		}
	}
	return cluster.Member{}, false
}

// newPlacement is the order in which a new object's servers are taken:
// the live servers in the key's rendezvous order, draining ones last. A
// draining server thus receives new shards only when too few others are
// live for the code, rather than failing the write; its drain then
// reports those stripes as waiting for capacity.
func (l *layer) newPlacement(key string) []string {
	var ids, drain []string
	for _, m := range l.nodes.Live(cluster.RoleShard) {
		switch {
		case m.HTTP == "":
		case m.Draining:
			drain = append(drain, m.ID)
		default:
			ids = append(ids, m.ID)
		}
	}
	return append(placement.Order(key, ids), placement.Order(key, drain)...)
}

// targets maps a placement to shard targets; servers not alive get an empty
// address, which the stripe package treats as a missing shard.
func (l *layer) targets(nodes []string) []stripe.Target {
	_, addrs := l.liveShards()
	out := make([]stripe.Target, len(nodes))
	for i, id := range nodes {
		out[i] = stripe.Target{Node: id, Addr: addrs[id]}
	}
	return out
}

func placementKey(bucket, key string) string { return bucket + "/" + key }

// manifestVote collects the answers of one lookup.
type manifestVote struct {
	byVersion map[metadata.Version]*metadata.Manifest
	votes     map[metadata.Version]int
	// answered holds the servers that answered, with versions or without.
	answered map[string]bool
	// holders lists the servers that hold each version.
	holders map[metadata.Version][]string
	// unreachable counts the servers asked that did not answer: gossip
	// calls them dead, or the request failed.
	unreachable int
	errs        []error
	// keep, when set, selects the versions counted (lookupWhere).
	keep func(*metadata.Manifest) bool
}

// readManifest returns the newest manifest of bucket/key that every
// answer allows, errNotFound only when the answers prove that no write of
// the key was acknowledged (or its newest is a tombstone), and
// errUnavailable when too few servers answered to tell (a client then
// sees 503 SlowDown, never a false 404).
//
// A version is readable when at least k servers hold it (as many as a
// decode needs). A server votes for every version it holds, current or
// previous. The lookup walks the key's rendezvous order over every known
// shard server, live or not, in batches; dead servers count as
// unreachable. See decide for the rules and docs/CONSISTENCY.md for why
// they are enough.
func (l *layer) readManifest(ctx context.Context, bucket, key string) (*metadata.Manifest, error) {
	return l.lookup(ctx, bucket, key, true)
}

// readHead is readManifest without the inline data of a small object
// (its Inline is nil): for HEAD, preconditions and deletes, which need the
// version and its attributes only. Asking n servers for a 100 KiB object's
// bytes only to use one copy costs more than the lookup itself.
func (l *layer) readHead(ctx context.Context, bucket, key string) (*metadata.Manifest, error) {
	return l.lookup(ctx, bucket, key, false)
}

// lookup is readManifest; inline asks for a small object's data, which
// one server sends (the first of the order, or a holder asked afterwards).
//
// The first round asks firstAsk live servers of the key's first maxN (6
// of 9 with rs-6-3): as many as k votes need, and more than the
// maxN-minK+1 that meet every k holders of a visible version, so a newer
// one is seen and weighed (decide), and absence (fewer than minK silent)
// is proven by them. A healthy key costs those 6 calls; no committed
// mark answers from fewer (see decide). The rest of the first maxN are
// asked only when those answers do not decide (servers down, a write in
// flight), and then small batches further along the order (placements
// shifted by failures and repairs).
func (l *layer) lookup(ctx context.Context, bucket, key string, inline bool) (*metadata.Manifest, error) {
	m, err := l.lookupWhere(ctx, bucket, key, inline, nil)
	if _, ok := err.(*deleteMarkerError); ok {
		return nil, errNotFound
	}
	return m, err
}

// lookupWhere is lookup over the manifests keep accepts only (nil: all):
// with matchVersion, the lookup of one version of a versioned key, by
// the same rules. A tombstone found is returned as a *deleteMarkerError,
// which is errNotFound to callers that do not look further.
func (l *layer) lookupWhere(ctx context.Context, bucket, key string, inline bool, keep func(*metadata.Manifest) bool) (*metadata.Manifest, error) {
	order, addrs := l.manifestOrder(bucket, key)
	v := newVote()
	v.keep = keep
	first := order[:min(len(order), max(l.maxN, 1))]
	var batches [][]string
	var ask, rest []string
	for _, id := range first {
		if _, live := addrs[id]; live && len(ask) < l.firstAsk(len(first)) {
			ask = append(ask, id)
		} else {
			rest = append(rest, id)
		}
	}
	batches = append(batches, ask, rest)
	for after := order[len(first):]; len(after) > 0; after = after[min(len(after), 3):] {
		batches = append(batches, after[:min(len(after), 3)])
	}
	for i, batch := range batches {
		if len(batch) == 0 {
			continue
		}
		full := ""
		if inline && i == 0 {
			full = order[0]
		}
		l.askManifests(ctx, batch, addrs, bucket, key, v, full)
		m, verdict := l.decide(v, first)
		switch verdict {
		case verdictFound:
			if m.Deleted {
				return nil, &deleteMarkerError{m}
			}
			if inline && hasInline(m) && m.Inline == nil {
				return l.fetchInline(ctx, m, v.holders[m.Version], addrs)
			}
			return m, nil
		case verdictAbsent:
			return nil, errNotFound
		}
	}
	err := fmt.Errorf("%w: %s/%s: %d servers unreachable, %d manifest versions seen, none proven newest",
		errUnavailable, bucket, key, v.unreachable, len(v.votes))
	if len(v.errs) > 0 {
		// Servers known dead count as unreachable without an error.
		err = fmt.Errorf("%w: %w", err, errors.Join(v.errs...))
	}
	return nil, err
}

// meetAll is how many of a key's first width servers a lookup asks in
// its first round: enough to meet any k holders of a visible version
// and to prove absence (width-minK+1).
func (l *layer) meetAll(width int) int {
	return max(width-l.minK+1, 1)
}

// firstAsk is how many of a key's first width servers a lookup asks in
// its first two rounds: meetAll, and enough to read a version of any
// code by k votes (maxK).
func (l *layer) firstAsk(width int) int {
	return max(l.maxK, l.meetAll(width))
}

// manifestOrder is the key's rendezvous order over every known shard
// server with an address, and the addresses of the live ones. Dead
// servers stay in the order: skipping them would make the servers after
// them stand in for holders that are merely down.
func (l *layer) manifestOrder(bucket, key string) ([]string, map[string]string) {
	_, addrs := l.liveShards()
	return placement.Order(placementKey(bucket, key), l.shardIDs()), addrs
}

// shardIDs returns the IDs of every known shard server with an address,
// live or not.
func (l *layer) shardIDs() []string {
	var ids []string
	for _, m := range l.nodes.Members() {
		if m.Role == cluster.RoleShard && m.HTTP != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// newVote returns an empty tally of a lookup.
func newVote() *manifestVote {
	return &manifestVote{byVersion: map[metadata.Version]*metadata.Manifest{}, votes: map[metadata.Version]int{},
		answered: map[string]bool{}, holders: map[metadata.Version][]string{}}
}

// add counts one server's answer: the versions it holds, current first
// (none: it holds no version of the key). Whether the current one
// carries the committed mark is ignored: marks serve the servers' confirm
// notes only (see decide).
func (v *manifestVote) add(l *layer, id string, versions []*metadata.Manifest, _ bool) {
	v.answered[id] = true
	for _, m := range versions {
		l.clock.observe(m.Version)
		if v.keep != nil && !v.keep(m) {
			continue
		}
		if have, ok := v.byVersion[m.Version]; !ok || (have.Inline == nil && m.Inline != nil) {
			v.byVersion[m.Version] = m
		}
		v.votes[m.Version]++
		v.holders[m.Version] = append(v.holders[m.Version], id)
	}
}

// fail counts a server that did not answer.
func (v *manifestVote) fail(err error) {
	v.unreachable++
	if err != nil {
		v.errs = append(v.errs, err)
	}
}

// hasInline reports whether m is an object stored inside its manifest.
func hasInline(m *metadata.Manifest) bool { return !m.Deleted && len(m.Parts) == 0 && m.Size > 0 }

// fetchInline returns m with its inline data, read from one of its
// holders.
func (l *layer) fetchInline(ctx context.Context, m *metadata.Manifest, holders []string, addrs map[string]string) (*metadata.Manifest, error) {
	var errs []error
	for _, id := range holders {
		cur, prev, err := l.shards.GetManifestVersions(ctx, addrs[id], m.Bucket, m.Key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range append([]*metadata.Manifest{cur}, prev...) {
			if c.Version == m.Version && int64(len(c.Inline)) == m.Size {
				return c, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %s/%s: none of %d holders of version %s sent its data: %v", errUnavailable, m.Bucket, m.Key, len(holders), m.Version, errors.Join(errs...))
}

// askManifests asks nodes for the versions of bucket/key they hold,
// without inline data but from full.
func (l *layer) askManifests(ctx context.Context, nodes []string, addrs map[string]string, bucket, key string, v *manifestVote, full string) {
	var mu sync.Mutex
	var g errgroup.Group
	for _, id := range nodes {
		addr, live := addrs[id]
		if !live {
			v.fail(nil)
			continue
		}
		g.Go(func() error {
			var res shardrpc.ManifestVersionsResponse
			var err error
			if id != full && l.lookups != nil {
				res, err = l.lookups.lookup(ctx, addr, bucket, key)
			} else {
				res, err = l.shards.LookupVersions(ctx, addr, bucket, key, id == full)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, shardrpc.ErrNotFound):
				v.add(l, id, nil, false)
			case err != nil:
				v.fail(err)
			default:
				v.add(l, id, append([]*metadata.Manifest{res.Current}, res.Previous...), res.Committed)
			}
			return nil
		})
	}
	g.Wait()
}

// verdict is what the answers collected so far prove.
type verdict int

const (
	verdictUnsure verdict = iota // ask further along the order, or 503
	verdictFound                 // the returned manifest is the newest visible version
	verdictAbsent                // no version of the key is visible
)

// decide applies the read rules to the answers so far; first is the
// first batch of the key's order (the placement of a write made while
// every server was up).
//
// A version is visible once k servers hold it: a read may then have
// returned it (reads need k, as many as a decode needs). Every write
// acknowledged (k+1) is visible; a failed write that reached k is too,
// and stays (nothing takes back a version k servers hold: the writer
// aborts only below k, and servers roll back only versions provably held
// by fewer than k). So a read must never skip a version that may be
// visible for an older one, nor call the key absent while one may exist.
// A version may be visible when its votes plus the members of its
// placement that did not answer reach k; below that it is a failed write
// or one still in flight, which is ordered after this read.
//
//   - found: the newest readable version (>= k votes) when no newer
//     version may be visible, and fewer than minK of first did not
//     answer (as for absent: a newer version whose holders are all
//     silent is named by no answer);
//   - absent: no version seen may be visible, and fewer than minK of
//     first did not answer, so any k servers of a placement within first
//     include one that answered;
//   - unsure otherwise.
//
// No committed mark stands in for votes: a lookup that returned a version
// all of the first maxN-minK+1 answers named, one marked, read a deleted
// object (chaos seed 8383: servers outside the version's placement, which
// a manifest sync filled and its tombstone never reaches) and could read
// a stale one (an acknowledged newer write stored by k+1 servers past
// failures among the first maxN); docs/CONSISTENCY.md, Open findings.
func (l *layer) decide(v *manifestVote, first []string) (*metadata.Manifest, verdict) {
	// A version no answering server names is not weighed below: when
	// minK or more of first are silent, the holders of a newer visible
	// version may all be among them, so neither the older version found
	// nor absence is proven.
	silent := 0
	for _, id := range first {
		if !v.answered[id] {
			silent++
		}
	}
	var best *metadata.Manifest
	for ver, m := range v.byVersion {
		if v.votes[ver] < l.readQuorum(m) {
			continue
		}
		if best == nil || best.Version.Less(ver) {
			best = m
		}
	}
	for ver, m := range v.byVersion {
		if best != nil && !best.Version.Less(ver) {
			continue
		}
		possible := v.votes[ver]
		for _, id := range m.Placement {
			if !v.answered[id] {
				possible++
			}
		}
		if possible >= l.readQuorum(m) {
			return nil, verdictUnsure
		}
	}
	switch {
	case silent >= l.minK:
		return nil, verdictUnsure
	case best != nil:
		return best, verdictFound
	default:
		return nil, verdictAbsent
	}
}

// tombstone is a delete of m: a new version on m's placement.
func (l *layer) tombstone(m *metadata.Manifest) *metadata.Manifest {
	t := &metadata.Manifest{Bucket: m.Bucket, Key: m.Key, Version: l.clock.next(), Deleted: true,
		Code: m.Code, Placement: m.Placement}
	t.Modified = time.Unix(0, t.Version.TS).UTC()
	return t
}

// readQuorum is how many servers must hold a version of m's code for it
// to be read: k, as many as a decode needs.
func (l *layer) readQuorum(m *metadata.Manifest) int {
	if m.Code == "" {
		return 1
	}
	if c, err := l.code(m.Code); err == nil {
		return c.DataShards()
	}
	return 1
}

// writeQuorum is how many servers store a manifest of m's code before
// its write is acknowledged: k+1, or the whole placement when smaller.
func (l *layer) writeQuorum(m *metadata.Manifest) int {
	if c, err := l.code(m.Code); err == nil {
		return min(c.DataShards()+1, max(len(m.Placement), 1))
	}
	return max(len(m.Placement)/2+1, 1)
}

// writeManifest stores m on nodes and succeeds when at least quorum of
// them made it durable. A server that holds a newer version refuses it
// (errNewer; see commit for why a write may try again). lease is the
// holder of the key's lease the writer holds, or shardrpc.NoLease:
// servers refuse the write while someone else holds the key's lease.
//
// Once m is on a quorum, the servers that stored it are told (notifier,
// shardrpc.PathConfirmed): where it replaced a version (an overwrite, a
// tombstone) their confirm jobs need not ask their peers. Nothing is
// marked for readers: lookups count votes (decide).
func (l *layer) writeManifest(ctx context.Context, m *metadata.Manifest, nodes []string, quorum int, lease string) error {
	_, err := l.storeManifest(ctx, m, nodes, quorum, lease)
	return err
}

// storeManifest is writeManifest; it returns the addresses that stored m.
func (l *layer) storeManifest(ctx context.Context, m *metadata.Manifest, nodes []string, quorum int, lease string) ([]string, error) {
	stored, replaced, errs := l.putOnLive(ctx, m, nodes, lease)
	if ok := len(stored); ok >= quorum && ok > l.readQuorum(m) && l.notify != nil {
		// NB: the notice vouches for a write quorum (k+1): a confirm
		// job trusts it in place of asking its peers.
		l.notify.committed(m, stored, len(replaced) > 0)
	}
	if ok := len(stored); ok < quorum {
		// Taken back only while no read can have returned it (readers
		// need k holders): once k servers hold it, a reader may have
		// answered with it, and taking it back would make that answer
		// disappear. It then stays, and the client's failure means what
		// a 5xx means in S3: the write may or may not have happened.
		qerr := &stripe.QuorumError{Op: "manifest write", Want: quorum, Got: ok, Errs: errs}
		if ok < l.readQuorum(m) {
			l.abortManifest(m, stored)
			return stored, qerr
		}
		return stored, fmt.Errorf("%w: %w", errStayed, qerr)
	}
	return stored, nil
}

// putOnLive writes m to the live servers among nodes and returns the
// addresses that stored it, those of them where it replaced a version, and
// the failures; a server that holds a newer version counts as a failure
// (errNewer), and the clock moves past it.
func (l *layer) putOnLive(ctx context.Context, m *metadata.Manifest, nodes []string, lease string) (stored, replaced []string, errs []error) {
	var mu sync.Mutex
	_, errs = l.onLive(nodes, func(_, addr string) error {
		res, err := l.putManifest(ctx, addr, m, lease)
		if err != nil {
			return err
		}
		if m.Version.Less(res.Current) {
			l.clock.observe(res.Current)
			return fmt.Errorf("%w: %s over %s", errNewer, res.Current, m.Version)
		}
		mu.Lock()
		stored = append(stored, addr)
		if res.Replaced {
			replaced = append(replaced, addr)
		}
		mu.Unlock()
		return nil
	})
	return stored, replaced, errs
}

// abortManifest takes a failed manifest write that fewer than k servers
// stored back from them, before the client hears of the failure. A server that misses the abort
// rolls the write back on its own once it can prove no quorum holds it.
func (l *layer) abortManifest(m *metadata.Manifest, addrs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var g errgroup.Group
	for _, addr := range addrs {
		g.Go(func() error {
			if err := l.shards.AbortManifest(ctx, addr, m.Bucket, m.Key, m.Version); err != nil {
				l.log.Warn("abort of a failed manifest write", "bucket", m.Bucket, "key", m.Key, "addr", addr, "err", err)
			}
			return nil
		})
	}
	g.Wait()
}

// clock hands out manifest versions: a hybrid logical clock. A version
// is the wall clock (plus Config.ClockOffset), but never less than
// observeStep past any version this gateway has seen, and strictly
// increasing; writes read the key's versions before they commit (see
// commit), so a write is newer than every write acknowledged before it
// began, whatever the clocks of the gateways that made them.
//
// The step leaves room below a client's version for a repair switch,
// which rewrites version V as V.TS+1 (repair/worker_repair.go): a client
// write made after seeing V stays newer than any switch of V.
type clock struct {
	writer string
	offset time.Duration // Config.ClockOffset
	mu     sync.Mutex
	last   int64
}

// observeStep is how far past a seen version the clock moves.
const observeStep = int64(time.Microsecond)

func (c *clock) next() metadata.Version {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().Add(c.offset).UnixNano()
	if now <= c.last {
		now = c.last + 1
	}
	c.last = now
	return metadata.Version{TS: now, Writer: c.writer}
}

// observe moves the clock past v.
func (c *clock) observe(v metadata.Version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := v.TS + observeStep; t > c.last {
		c.last = t
	}
}
