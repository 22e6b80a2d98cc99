package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/sse"
)

// Config configures a gateway.
type Config struct {
	// SSEKeys are the cluster keys of SSE-S3 (internal/sse): the newest
	// seals new objects' data keys, all open. nil: SSE-S3 and bucket
	// default encryption are refused.
	SSEKeys *sse.Keyring
	// SSECOverHTTP accepts SSE-C keys on plain HTTP (S3 refuses them
	// there, as the key crossed the network in clear): for a gateway on
	// loopback (regen dev) or behind a TLS-terminating proxy.
	SSECOverHTTP bool
	// Addr is where S3 is served, host:port.
	Addr string
	// Credentials maps access keys to secret keys. These configured keys
	// are administrators; keys made with `regen admin key create` are
	// stored in the cluster instead (accesskeys.go).
	Credentials map[string]string
	// ClusterSecret is the secret every node of the cluster shares. The
	// gateway derives from it the key that seals stored secret keys, so
	// every gateway of a cluster opens what another sealed. Empty: no
	// stored access keys, only Credentials.
	ClusterSecret string
	// KeyCacheTTL is how long stored access keys are cached: a deleted
	// key, or a changed admin flag, takes effect on every gateway within
	// it. Rights on buckets live in bucket records (BucketCacheTTL).
	KeyCacheTTL time.Duration
	// Domain, when set, enables virtual-hosted-style requests: a Host of
	// BUCKET.Domain names the bucket, and the whole path is the key.
	Domain string
	// Region is the region reported to clients and accepted in signatures
	// ("" accepts any region in the credential scope).
	Region string
	// NodeID identifies this gateway as a writer in manifest versions.
	NodeID string
	// DefaultCode codes objects of buckets without a code of their own.
	DefaultCode string
	// StorageClasses maps S3 storage classes to code names; a PUT's
	// x-amz-storage-class picks the code. STANDARD always exists and maps
	// to DefaultCode unless listed.
	StorageClasses map[string]string
	// ChunkSize is the shard chunk of a full stripe, in bytes (rounded up
	// by codec.ChunkSize so that every sub-chunk is 64-byte aligned). 1 MiB keeps stripes large enough for
	// efficient disk and network I/O and memory per request at a few
	// stripes.
	ChunkSize int64
	// InlineMax is the largest object stored inside its manifest instead
	// of as shards.
	InlineMax int64
	// WriteMemory bounds the stripe buffers of all PUTs, parts and copies
	// at once (stripe.Buffers): past it, uploads wait for buffers, so the
	// gateway's memory stays bounded however many clients write. 96 MiB
	// holds ten rs-6-3 stripes of 1 MiB chunks, two or three in flight
	// for each of four concurrent uploads; at least one stripe always
	// fits. Buffers unused for 30 s are freed (docs/DATAPATH.md).
	WriteMemory int64
	// ReadMemory bounds the shard buffers of all GETs (and copy
	// sources) at once (stripe.ReadMemory): past it, reads wait for
	// stripes to be written to their clients, so clients that stop
	// reading cannot grow the gateway. 64 MiB holds ten rs-6-3 stripes
	// of 1 MiB chunks; a stripe larger than it is read alone.
	ReadMemory int64
	// BodyMemory bounds the request bodies all requests hold whole at
	// once: XML and policy documents (up to 2 MiB each) and inline
	// objects (up to InlineMax). Past it, such requests wait a few
	// seconds, then get 503 SlowDown (bodymem.go). At least
	// MinBodyMemory.
	BodyMemory int64
	// ShardTimeout bounds one shard fetch on the read path.
	ShardTimeout time.Duration
	// BucketCacheTTL is how long bucket existence is cached.
	BucketCacheTTL time.Duration
	// OpTimeout bounds the metadata work of one operation: one request,
	// or one key of a DeleteObjects request (up to 1000 keys, each with
	// a manifest read and a tombstone write, would not fit in one).
	OpTimeout time.Duration
	// LifecycleDay is the length of a lifecycle rule's day: 24 h, as in
	// S3; tests and `regen dev` may shorten it to see rules act.
	LifecycleDay time.Duration
	// LifecycleInterval is how often the lifecycle service walks the
	// buckets that have lifecycle rules.
	LifecycleInterval time.Duration
	// LifecycleRate bounds the lifecycle service's deletes and upload
	// aborts, per second.
	LifecycleRate int
	// ClockOffset is added to this gateway's wall clock when it makes
	// versions. It exists for tests and `regen chaos`, which skew one
	// gateway by minutes to show that clock skew cannot reorder
	// acknowledged writes; leave it zero.
	ClockOffset time.Duration

	// Limits of the S3 listener (the status page shares it). A client
	// that breaks them gets an S3 error or loses its connection; the
	// gateway keeps serving everyone else.
	Limits Limits

	Logger *slog.Logger
	// Registerer takes the gateway's metrics; Gatherer serves /metrics.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// DefaultConfig returns a config with every default set.
func DefaultConfig() Config {
	return Config{
		Addr:              "127.0.0.1:9000",
		Region:            "us-east-1",
		DefaultCode:       "rs-6-3",
		StorageClasses:    map[string]string{},
		ChunkSize:         1 << 20,
		InlineMax:         128 << 10,
		WriteMemory:       96 << 20,
		ReadMemory:        64 << 20,
		BodyMemory:        32 << 20,
		ShardTimeout:      15 * time.Second,
		BucketCacheTTL:    2 * time.Second,
		KeyCacheTTL:       2 * time.Second,
		OpTimeout:         30 * time.Second,
		LifecycleDay:      24 * time.Hour,
		LifecycleInterval: time.Hour,
		LifecycleRate:     100,
		Limits:            DefaultLimits(),
	}
}

// Limits bound what one client can hold of a gateway: connections, time
// and header bytes. Bodies are bounded by the handlers (XML bodies are read
// through a 2 MiB limit, objects are streamed).
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's line and headers, and
	// a body of up to 1 MiB, which is read with them. Headers trickled
	// slower than this lose the connection. Default 30s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds each wait for more of a streamed request body:
	// a client silent this long mid-body gets RequestTimeout, as from S3
	// (which waits about 20 s). Default 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds each wait to hand response bytes to a client:
	// one that reads nothing this long loses the connection. Time the
	// gateway spends fetching shards does not count. Default 60s.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request. Default 60s.
	IdleTimeout time.Duration
	// MaxConns caps open connections; one over it is answered 503
	// SlowDown and closed. Each holds up to MaxHeaderBytes of buffer, so
	// the default 4096 keeps idle connections within about 100 MiB.
	MaxConns int
	// MaxConnsPerIP caps open connections from one client address, so
	// one client cannot take every place. Default 1024; behind a load
	// balancer (one address for everyone) raise it to MaxConns. 0: no cap.
	MaxConnsPerIP int
	// MaxHeaderBytes bounds a request's line and headers (S3 keys are at
	// most 1 KiB, user metadata 2 KiB). Larger headers answer 400
	// RequestHeaderSectionTooLarge. Default 16 KiB.
	MaxHeaderBytes int
}

// DefaultLimits returns the default Limits.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 30 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxConns:          4096,
		MaxConnsPerIP:     1024,
		MaxHeaderBytes:    16 << 10,
	}
}

// Validate checks l.
func (l Limits) Validate() error {
	switch {
	case l.ReadHeaderTimeout <= 0 || l.ReadTimeout <= 0 || l.WriteTimeout <= 0 || l.IdleTimeout <= 0:
		return fmt.Errorf("gateway: timeouts must be positive (read header %v, read %v, write %v, idle %v)", l.ReadHeaderTimeout, l.ReadTimeout, l.WriteTimeout, l.IdleTimeout)
	case l.MaxConns <= 0:
		return fmt.Errorf("gateway: max connections %d must be positive", l.MaxConns)
	case l.MaxConnsPerIP < 0 || l.MaxConnsPerIP > l.MaxConns:
		return fmt.Errorf("gateway: max connections per address %d outside 0..%d (max connections)", l.MaxConnsPerIP, l.MaxConns)
	case l.MaxHeaderBytes < 4<<10 || l.MaxHeaderBytes > 1<<20:
		return fmt.Errorf("gateway: max header bytes %d outside 4 KiB..1 MiB", l.MaxHeaderBytes)
	}
	return nil
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Addr == "" {
		return errors.New("gateway: empty listen address")
	}
	if len(c.Credentials) == 0 {
		return errors.New("gateway: no credentials configured")
	}
	if c.NodeID == "" {
		return errors.New("gateway: empty node ID")
	}
	if c.NodeID[0] <= '+' {
		// NB: repair switches write as "+repair-<node>", which must sort
		// below every gateway writer (layer.updateVersion wins its ties).
		return fmt.Errorf("gateway: node ID %q must not start with '+' or a character sorting below it", c.NodeID)
	}
	if _, err := codec.Parse(c.DefaultCode); err != nil {
		return fmt.Errorf("gateway: default code: %w", err)
	}
	for class, code := range c.StorageClasses {
		if _, err := codec.Parse(code); err != nil {
			return fmt.Errorf("gateway: storage class %s: %w", class, err)
		}
	}
	if c.ChunkSize < 4<<10 || c.ChunkSize > 64<<20 {
		return fmt.Errorf("gateway: chunk size %d outside 4 KiB..64 MiB", c.ChunkSize)
	}
	if c.OpTimeout <= 0 {
		return fmt.Errorf("gateway: operation timeout %v must be positive", c.OpTimeout)
	}
	if c.LifecycleDay <= 0 || c.LifecycleInterval <= 0 || c.LifecycleRate <= 0 {
		return fmt.Errorf("gateway: lifecycle day %v, interval %v and rate %v must be positive", c.LifecycleDay, c.LifecycleInterval, c.LifecycleRate)
	}
	if c.ClusterSecret != "" && c.KeyCacheTTL <= 0 {
		return fmt.Errorf("gateway: access key cache TTL %v must be positive", c.KeyCacheTTL)
	}
	if c.WriteMemory <= 0 {
		return fmt.Errorf("gateway: write memory %d must be positive", c.WriteMemory)
	}
	if c.ReadMemory <= 0 {
		return fmt.Errorf("gateway: read memory %d must be positive", c.ReadMemory)
	}
	if c.InlineMax < 0 || c.InlineMax > 1<<20 {
		return fmt.Errorf("gateway: inline max %d outside 0..1 MiB", c.InlineMax)
	}
	if c.BodyMemory < MinBodyMemory {
		return fmt.Errorf("gateway: body memory %d below %d (two of the largest XML body)", c.BodyMemory, MinBodyMemory)
	}
	return c.Limits.Validate()
}
