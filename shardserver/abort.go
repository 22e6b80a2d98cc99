package shardserver

import (
	"fmt"
	"net/http"
	"time"

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
	if err := s.abortable(r, bucket, key, v); err != nil {
		s.fail(w, r, err)
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

// abortable refuses the abort of version v of bucket/key when it is the
// current version here, locked (retention in force or legal hold) and
// older than RollbackAfter by its own timestamp: a writer aborts its
// failed write right after the failure, so an abort of an old locked
// version is not one (a holder of the cluster secret removing it). The
// confirm job still rolls back a failed write it proves fewer than k
// servers hold, whatever its lock.
func (s *Server) abortable(r *http.Request, bucket, key string, v metadata.Version) error {
	cur, err := s.meta.GetManifest(r.Context(), bucket, key)
	if err != nil || cur.Version != v {
		return nil // RollBack does nothing
	}
	now := s.now()
	if cur.Lock.Retained(now) && now.Sub(time.Unix(0, v.TS)) > s.cfg.RollbackAfter {
		return fmt.Errorf("%w: %s/%s version %s is older than %s", metadata.ErrLocked, bucket, key, v, s.cfg.RollbackAfter)
	}
	return nil
}
