// Package gateway is regen's S3 front end: a stateless fiber server that
// authenticates requests (SigV4), turns them into stripe-group reads and
// writes on the shard servers, and answers in S3's XML dialect.
//
// A gateway keeps no state but short-lived caches. Everything it needs to
// serve an object is in the object's manifest, which lives on the shard
// servers holding the object's shards; the gateway finds them by walking the
// key's rendezvous order over the live shard servers it learns from gossip.
// Any number of gateways can therefore serve the same cluster.
//
// Writes follow one rule: shards first, then manifests, and the client gets
// its 200 only when at least k+1 shards and their manifests are durable.
// Reads take the newest manifest version that at least k servers hold,
// when no newer one may have been acknowledged, and answer 503 when the
// servers that answer cannot prove the answer. Versions come from a hybrid
// clock that moves past every version read, and every write of a key is
// fenced by the key's lease. docs/CONSISTENCY.md gives the guarantees and
// why these rules keep them.
//
// Access keys are the configured ones (administrators) and the ones stored
// on the shard servers like bucket records, with rights per bucket kept in
// the bucket records (accesskeys.go, access.go); docs/ACCESS.md gives the
// rules.
package gateway
