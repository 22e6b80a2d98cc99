package metadata

// EngineStats are the figures of the store's storage engine that explain
// its cost per operation: how often a read found its block in the cache,
// how many tables a point read may visit, and how much compaction work is
// behind. Repair and listing at scale are bounded by these (profiles of a
// million-object repair: point reads that missed the cache and compaction
// were half of a shard server's CPU), so an operator sees them beside the
// request rates.
type EngineStats struct {
	CacheHits, CacheMisses int64 // block cache lookups since open
	CacheBytes             int64 // bytes the block cache holds
	// ReadAmp is how many tables or sublevels a point read may visit (L0
	// sublevels plus one per non-empty lower level).
	ReadAmp     int
	L0Tables    int64
	L0Sublevels int32
	// CompactionDebt estimates the bytes to compact before the tree is
	// stable again; Compactions counts those run since open.
	CompactionDebt uint64
	Compactions    int64
	DiskBytes      uint64 // tables, logs and the rest on disk
	// SingleDeleteMisuse counts single deletes that a compaction found
	// deleting nothing or shadowing a second set of their key since open:
	// 0 unless the invariant of stageVersions and DoneConfirm broke.
	SingleDeleteMisuse int64
}

// EngineStats returns the engine's figures now.
func (s *Store) EngineStats() EngineStats {
	m := s.db.Metrics()
	return EngineStats{
		CacheHits:      m.BlockCache.Hits,
		CacheMisses:    m.BlockCache.Misses,
		CacheBytes:     m.BlockCache.Size,
		ReadAmp:        m.ReadAmp(),
		L0Tables:       m.Levels[0].TablesCount,
		L0Sublevels:    m.Levels[0].Sublevels,
		CompactionDebt: m.Compact.EstimatedDebt,
		Compactions:    m.Compact.Count,
		DiskBytes:      m.DiskSpaceUsage(),

		SingleDeleteMisuse: s.misuse.Load(),
	}
}
