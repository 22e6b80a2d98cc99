package shardserver

import (
	"fmt"
	"net/http"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// abortManifest rolls back a manifest its writer failed to get onto a
// write quorum. Only the writer knows the write failed; without this, a
// failed write that happened to reach k servers would be readable, and one
// that reached fewer would linger until a confirm job proved it dead.
func (s *Server) abortManifest(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bucket, key := q.Get(shardrpc.ParamBucket), q.Get(shardrpc.ParamKey)
	v, err := metadata.ParseVersion(q.Get(shardrpc.ParamVersion))
	if bucket == "" || key == "" || err != nil {
		s.fail(w, r, fmt.Errorf("%w: bucket, key and a valid version are required", shardrpc.ErrBadRequest))
		return
	}
	failed, err := s.meta.RollBack(r.Context(), bucket, key, v)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if failed != nil {
		restored, _, err := s.meta.Versions(r.Context(), bucket, key)
		if err != nil {
			restored = nil // nothing before it: the key is gone here
		}
		s.log.Info("aborted failed manifest write", "bucket", bucket, "key", key, "version", v.String())
		s.enqueueGarbage(r.Context(), garbage(failed, restored, s.cfg.NodeID), s.now().Add(s.cfg.GCDelay))
		if metadata.Collectable(restored) {
			// A tombstone current again: its earlier check ended when the
			// failed write replaced it.
			s.enqueueTombstone(r.Context(), restored)
		}
	}
	shardrpc.WriteJSON(w, http.StatusOK, struct{}{})
}
