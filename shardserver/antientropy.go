package shardserver

import (
	"fmt"
	"net/http"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// syncDigest answers a peer's anti-entropy comparison: the range sums of
// the manifests this server shares with it (metadata/digest.go).
func (s *Server) syncDigest(w http.ResponseWriter, r *http.Request) {
	peer := r.URL.Query().Get(shardrpc.ParamPeer)
	if peer == "" {
		s.fail(w, r, fmt.Errorf("%w: peer is required", shardrpc.ErrBadRequest))
		return
	}
	if x := r.URL.Query().Get(shardrpc.ParamRoot); x != "" {
		root, err := metadata.ParseSum(x)
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: %w", shardrpc.ErrBadRequest, err))
			return
		}
		if root == s.meta.RangeRoot(peer) {
			if s.cfg.OnInStep != nil {
				s.cfg.OnInStep(peer)
			}
			shardrpc.WriteJSON(w, http.StatusOK, shardrpc.SyncDigest{Same: true})
			return
		}
	}
	b, err := s.meta.RangeDigest(peer).MarshalBinary()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.SyncDigest{Sums: b})
}

// syncEntries lists the entries of the ranges a peer found different.
func (s *Server) syncEntries(w http.ResponseWriter, r *http.Request) {
	var req shardrpc.SyncEntriesRequest
	if err := s.decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Peer == "" || len(req.Ranges) > shardrpc.MaxSyncRanges {
		s.fail(w, r, fmt.Errorf("%w: a peer and at most %d ranges are required", shardrpc.ErrBadRequest, shardrpc.MaxSyncRanges))
		return
	}
	for _, rg := range req.Ranges {
		if rg < 0 || rg >= metadata.DigestRanges {
			s.fail(w, r, fmt.Errorf("%w: range %d out of [0, %d)", shardrpc.ErrBadRequest, rg, metadata.DigestRanges))
			return
		}
	}
	entries, err := s.meta.RangeEntries(r.Context(), req.Peer, req.Ranges)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.SyncEntriesResponse{Entries: entries})
}
