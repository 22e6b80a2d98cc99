package repair

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// A scan walks every local manifest to find the stripe groups that a down,
// lost or draining server affects. On a healthy cluster that finds nothing,
// and walking a million manifests every ScanInterval on every server would
// be the cluster's largest idle cost (issue 18: background work must grow
// with change, not with objects). So a scan is skipped when nothing that
// could make a group degraded has happened since a walk that found none:
//
//   - the membership is the same (walkSignature: every server's liveness,
//     suspicion, draining, replacement and process start);
//   - no repair job is queued or running, and none ended since that walk
//     (a failed or deferred one waits for the next walk, see runJob);
//   - no write stored here named a server that is not live (NoteWrite);
//   - the walk is younger than FullScanInterval, the safety net for
//     anything the above misses.
//
// A change of any of these starts a walk at the next ScanInterval, as
// before.
//
// While a repair runs the same holds for a walk that found degraded
// groups but queued all of them (covered): the queue holds everything the
// walk would find again, so walking again finds nothing new until the
// membership changes, a write names a server not live, or a job fails or
// is deferred (each marks the scan dirty). A dead server of a million
// small objects left ~60,000 jobs per server; walking 750,000 manifests
// every few seconds to find them queued already took a share of every
// server's CPU for the whole repair. Once the queue drains, the next scan
// walks (the last walk was not clean) and checks every repaired group.
// A walk is not covered while any group waits: for its grace (Pending),
// for a server to rebuild onto (Waiting), or for a drain's destination.

// walkSignature sums up what of the membership decides a walk's outcome.
func walkSignature(v nodeView) string {
	ids := make([]string, 0, len(v.nodes))
	for id := range v.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, id := range ids {
		ni := v.nodes[id]
		fmt.Fprintf(&b, "%s:%t:%t:%t:%t:%s:%d;", id, ni.Live, ni.Suspect, ni.Draining, v.replaced[id], ni.Replaces, v.boot[id])
	}
	return b.String()
}

// walkState is what the last full walk found. Guarded by scanner.mu;
// whether anything happened since that could change it is
// scanner.dirty, an atomic so that NoteWrite sets it under the MRF
// queue's lock without taking scanner.mu.
type walkState struct {
	at    time.Time // when it began (zero: none yet)
	sig   string    // walkSignature of its view
	clean bool      // it found nothing degraded, draining, unknown or to repair
	// covered: it found degraded or draining groups, and queued a job
	// for every one (nothing waiting for its grace or a destination).
	covered bool
	// skipped counts scans answered from it without walking.
	skipped int64
}

// needWalk reports whether a scan with view v must walk the manifests,
// and if so clears dirty (what happens from now on is seen by the walk
// or marks it again).
func (s *scanner) needWalk(sig string) bool {
	idle := s.jobs.idle() // NB: before s.mu, which the queue's lock never nests in
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := &s.walk
	dirty := s.dirty.Load()
	var why string
	switch {
	case ws.at.IsZero():
		why = walkFirst
	case ws.sig != sig:
		why = walkMembership
	case dirty != nil:
		why = *dirty
	case s.now().Sub(ws.at) >= s.fullEvery:
		why = walkFull
	case !(ws.clean && idle || ws.covered && !idle):
		why = walkUnsettled
	}
	if why == "" {
		ws.skipped++
		s.stripes.Scanned = s.now().UTC().Format(time.RFC3339Nano)
		s.stripes.Skipped = ws.skipped
		return false
	}
	s.dirty.Store(nil)
	s.m.walk(why)
	return true
}

// Why a scan walked (the reason label of regen_repair_scan_walks_total):
// a walk at a million objects costs seconds of a server's CPU, so which
// rule sent it is what an operator (or a scale run) needs to see.
const (
	walkFirst      = "first"      // no walk yet since the start
	walkMembership = "membership" // a server's state changed
	walkJob        = "job"        // a repair job failed or was deferred
	walkWrite      = "write"      // a write stored here named a server not live
	walkFull       = "full"       // FullScanInterval passed
	walkUnsettled  = "unsettled"  // the last walk left groups waiting, or the queue drained after it
)

// walked records a walk that began at t0 with signature sig.
func (s *scanner) walked(t0 time.Time, sig string, clean, covered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.walk.at, s.walk.sig, s.walk.clean, s.walk.covered = t0, sig, clean, covered && !clean
	s.stripes.Walked = t0.UTC().Format(time.RFC3339Nano)
	s.stripes.Skipped = s.walk.skipped
}

// repaired takes a group j repaired or moved out of the counts of the
// last walk, so that the status follows a repair between walks (the
// next walk counts afresh). Only a scan's jobs were counted (parts set):
// the scrubber's and the syncer's in-place rebuilds were not.
func (s *scanner) repaired(j *job) {
	if j.parts == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := int64(j.parts)
	if j.move {
		s.stripes.Draining = max(s.stripes.Draining-parts, 0)
	} else {
		s.stripes.Degraded = max(s.stripes.Degraded-parts, 0)
		s.stripes.LostShards = max(s.stripes.LostShards-parts*int64(len(j.lost)), 0)
	}
	s.m.stripes(s.stripes)
}
