package shardserver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// deleteVersion removes one version of a key (every manifest of its
// version ID) for good: S3's DeleteObject with a versionId. The removed
// manifests' shard files go to the GC queue after GCDelay, so reads of
// the version in flight finish; GC keeps any file another kept manifest
// still names.
//
// The server applies object lock itself (metadata.Store.DeleteVersion):
// a version whose newest manifest here is under retention or legal hold
// is refused (ErrLocked) unless the request bypasses a GOVERNANCE
// retention, so no holder of the cluster secret removes a locked version
// by this route without the bypass, and none a COMPLIANCE or held one.
func (s *Server) deleteVersion(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bucket, key, id := q.Get(shardrpc.ParamBucket), q.Get(shardrpc.ParamKey), q.Get(shardrpc.ParamVersionID)
	if bucket == "" || key == "" || id == metadata.NullVersionID {
		s.fail(w, r, fmt.Errorf("%w: bucket and key are required, and the null version is the empty version ID", shardrpc.ErrBadRequest))
		return
	}
	if fence := q.Get(shardrpc.ParamLease); fence != "" {
		// NB: fenced like a manifest write (putManifest): refused while
		// another writer holds the key's lease, so no removal lands
		// between a conditional write's check and its set.
		done, err := s.leases.admit(shardrpc.LeaseName(bucket, key), fence, s.now())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer done()
	}
	bypass := q.Get(shardrpc.ParamBypassGovernance) == "true"
	removed, err := s.meta.DeleteVersion(r.Context(), bucket, key, id, bypass)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(removed) > 0 {
		cur, _, err := s.meta.Versions(r.Context(), bucket, key)
		if err != nil && !errors.Is(err, metadata.ErrNotFound) {
			s.log.Warn("delete version: reading what stays", "bucket", bucket, "key", key, "err", err)
		}
		due := s.now().Add(s.cfg.GCDelay)
		for _, m := range removed {
			s.enqueueGarbage(r.Context(), garbage(m, cur, s.cfg.NodeID), due)
		}
		s.log.Info("deleted version", "bucket", bucket, "key", key, "version_id", id, "manifests", len(removed))
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.DeleteVersionResponse{Removed: len(removed)})
}
