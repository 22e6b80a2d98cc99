package shardserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// getManifestVersionsBatch is getManifestVersions for many keys of one
// bucket.
func (s *Server) getManifestVersionsBatch(w http.ResponseWriter, r *http.Request) {
	var req shardrpc.VersionsBatchRequest
	if err := s.decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Bucket == "" || len(req.Keys) > shardrpc.MaxBatch {
		s.fail(w, r, fmt.Errorf("%w: a bucket and at most %d keys", shardrpc.ErrBadRequest, shardrpc.MaxBatch))
		return
	}
	if r.URL.Query().Get(shardrpc.ParamFormat) == shardrpc.FormatBinary {
		// NB: batched lookups serve HEADs and deletes, which need no data.
		out := make([]shardrpc.RawKeyVersions, len(req.Keys))
		for i, key := range req.Keys {
			lk, err := s.meta.LookupRaw(r.Context(), req.Bucket, key, false)
			if err != nil && !errors.Is(err, metadata.ErrNotFound) && r.Context().Err() != nil {
				s.fail(w, r, err)
				return
			}
			out[i] = shardrpc.RawAnswer(lk, err)
		}
		shardrpc.WriteVersions(w, out)
		return
	}
	out := shardrpc.VersionsBatchResponse{Keys: make([]shardrpc.KeyVersions, len(req.Keys))}
	for i, key := range req.Keys {
		lk, err := s.meta.Lookup(r.Context(), req.Bucket, key, false)
		switch {
		case errors.Is(err, metadata.ErrNotFound):
		case err != nil:
			if r.Context().Err() != nil {
				s.fail(w, r, err)
				return
			}
			out.Keys[i].Err = err.Error()
		default:
			// NB: batched lookups serve deletes, which need no data.
			for _, p := range lk.Previous {
				p.Inline = nil
			}
			out.Keys[i] = shardrpc.KeyVersions{Current: lk.Current, Previous: lk.Previous}
		}
	}
	shardrpc.WriteJSON(w, http.StatusOK, out)
}

// putManifestsBatch is putManifest for many manifests: each is fenced by
// the request's lease parameter (shardrpc.Unfenced: not checked, as a
// single put without the parameter) and has its own result; they are
// stored together (storeManifests).
func (s *Server) putManifestsBatch(w http.ResponseWriter, r *http.Request) {
	var req shardrpc.PutBatchRequest
	if err := s.decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	fence := r.URL.Query().Get(shardrpc.ParamLease)
	if fence == "" || len(req.Manifests) > shardrpc.MaxBatch {
		s.fail(w, r, fmt.Errorf("%w: a lease fence and at most %d manifests", shardrpc.ErrBadRequest, shardrpc.MaxBatch))
		return
	}
	out := shardrpc.PutBatchResponse{Results: make([]shardrpc.PutResult, len(req.Manifests))}
	failed := func(i int, err error) {
		_, code := s.errorCode(r, err)
		out.Results[i] = shardrpc.PutResult{Code: code, Message: err.Error()}
	}
	ms := make([]*metadata.Manifest, 0, len(req.Manifests))
	at := make([]int, 0, len(req.Manifests)) // ms[j] is req.Manifests[at[j]]
	for i, m := range req.Manifests {
		if m == nil {
			failed(i, fmt.Errorf("%w: no manifest", shardrpc.ErrBadRequest))
			continue
		}
		if fence != shardrpc.Unfenced {
			done, err := s.leases.admit(shardrpc.LeaseName(m.Bucket, m.Key), fence, s.now())
			if err != nil {
				failed(i, err)
				continue
			}
			defer done()
		}
		ms = append(ms, m)
		at = append(at, i)
	}
	// NB: each manifest is stored even if the client goes away, as a
	// single put is: its follow-up work is queued with it.
	results, errs := s.storeManifests(context.WithoutCancel(r.Context()), ms)
	for j, i := range at {
		if errs[j] != nil {
			failed(i, errs[j])
			continue
		}
		res := results[j]
		cur := res.Current.Version
		out.Results[i] = shardrpc.PutResult{Stored: res.Stored, Current: &cur,
			Replaced: res.Stored && res.Replaced != nil, Held: res.Held}
	}
	shardrpc.WriteJSON(w, http.StatusOK, out)
}
