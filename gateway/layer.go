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
	PutManifest(ctx context.Context, addr string, m *metadata.Manifest) (bool, metadata.Version, error)
	AbortManifest(ctx context.Context, addr, bucket, key string, v metadata.Version) error
	GetManifest(ctx context.Context, addr, bucket, key string) (*metadata.Manifest, error)
	GetManifestVersions(ctx context.Context, addr, bucket, key string) (*metadata.Manifest, []*metadata.Manifest, error)
	List(ctx context.Context, addr string, q metadata.ListQuery) ([]metadata.ListEntry, bool, error)
	PutBucket(ctx context.Context, addr string, b *metadata.Bucket) error
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
)

// layer is the gateway's view of the shard servers: manifests by quorum,
// bucket records, and the codes in use.
type layer struct {
	shards ShardAPI
	nodes  Membership
	log    *slog.Logger
	clock  clock

	codes sync.Map // code name -> codec.Code
	// maxN is the widest stripe among configured codes: the first batch of
	// servers a manifest lookup asks.
	maxN int
}

func (l *layer) code(name string) (codec.Code, error) {
	if c, ok := l.codes.Load(name); ok {
		return c.(codec.Code), nil
	}
	c, err := codec.Parse(name)
	if err != nil {
		return nil, err
	}
	l.codes.Store(name, c)
	return c, nil
}

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
	notFound  int
	errs      []error
}

// readManifest returns the newest manifest of bucket/key that enough
// servers confirm: at least k of its code (as many as a decode needs, and
// fewer than the k+1 a successful write leaves). A server votes for every
// version it holds, current or previous: a failed overwrite leaves the
// acknowledged version as a previous one on the servers it reached, until
// it is confirmed or rolled back. A tombstone is returned as errNotFound. It walks the key's rendezvous order over the live shard
// servers in batches until an answer is confirmed.
func (l *layer) readManifest(ctx context.Context, bucket, key string) (*metadata.Manifest, error) {
	ids, addrs := l.liveShards()
	order := placement.Order(placementKey(bucket, key), ids)
	v := &manifestVote{byVersion: map[metadata.Version]*metadata.Manifest{}, votes: map[metadata.Version]int{}}
	asked := 0
	for asked < len(order) {
		// The first batch is as wide as the widest stripe, so a healthy
		// object is confirmed in one round trip; later batches are small
		// steps further along the order (placements shifted by failures
		// and repairs).
		end := min(len(order), asked+max(l.maxN, 1))
		if asked > 0 {
			end = min(len(order), asked+3)
		}
		l.askManifests(ctx, order[asked:end], addrs, bucket, key, v)
		asked = end
		if m, ok := l.confirmed(v); ok {
			if m.Deleted {
				return nil, errNotFound
			}
			return m, nil
		}
		if len(v.votes) == 0 && len(v.errs) == 0 {
			// Every server that would hold the key says it has none.
			return nil, errNotFound
		}
	}
	switch {
	case len(v.errs) == 0:
		// Only unconfirmed versions: writes that did not reach quorum.
		return nil, errNotFound
	case len(v.votes) == 0 && len(v.errs) < v.notFound:
		return nil, errNotFound
	}
	return nil, fmt.Errorf("%w: %s/%s: %d manifest versions seen, none confirmed (%d errors): %w",
		errUnavailable, bucket, key, len(v.votes), len(v.errs), errors.Join(v.errs...))
}

func (l *layer) askManifests(ctx context.Context, nodes []string, addrs map[string]string, bucket, key string, v *manifestVote) {
	var mu sync.Mutex
	var g errgroup.Group
	for _, id := range nodes {
		g.Go(func() error {
			cur, prev, err := l.shards.GetManifestVersions(ctx, addrs[id], bucket, key)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, shardrpc.ErrNotFound):
				v.notFound++
			case err != nil:
				v.errs = append(v.errs, err)
			default:
				for _, m := range append([]*metadata.Manifest{cur}, prev...) {
					if _, ok := v.byVersion[m.Version]; !ok {
						v.byVersion[m.Version] = m
					}
					v.votes[m.Version]++
				}
			}
			return nil
		})
	}
	g.Wait()
}

// confirmed picks the newest version with enough votes.
func (l *layer) confirmed(v *manifestVote) (*metadata.Manifest, bool) {
	var best *metadata.Manifest
	for ver, m := range v.byVersion {
		need := 1
		if c, err := l.code(m.Code); err == nil {
			need = c.DataShards()
		}
		if m.Code == "" {
			need = 1
		}
		if v.votes[ver] < need {
			continue
		}
		if best == nil || best.Version.Less(ver) {
			best = m
		}
	}
	return best, best != nil
}

// writeManifest stores m on nodes and succeeds when at least quorum of
// them made it durable (or already hold a newer version, which means this
// write lost a race it was allowed to lose).
func (l *layer) writeManifest(ctx context.Context, m *metadata.Manifest, nodes []string, quorum int) error {
	var mu sync.Mutex
	var stored []string
	ok, errs := l.onLive(nodes, func(_, addr string) error {
		if _, _, err := l.shards.PutManifest(ctx, addr, m); err != nil {
			return err
		}
		mu.Lock()
		stored = append(stored, addr)
		mu.Unlock()
		return nil
	})
	if ok < quorum {
		l.abortManifest(m, stored)
		return &stripe.QuorumError{Op: "manifest write", Want: quorum, Got: ok, Errs: errs}
	}
	return nil
}

// abortManifest takes a failed manifest write back from the servers that
// stored it, before the client hears of the failure, so the write is not
// visible even if it reached k of them. A server that misses the abort
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

// clock hands out manifest versions: wall-clock nanoseconds made strictly
// increasing within this gateway, tagged with the gateway's ID.
type clock struct {
	writer string
	offset time.Duration // Config.ClockOffset
	mu     sync.Mutex
	last   int64
}

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
