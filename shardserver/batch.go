package shardserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// batchParallelism bounds the manifests of one batch stored at once:
// their fsyncs share pebble's group commits instead of queueing one
// behind the other.
const batchParallelism = 32

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
// single put without the parameter) and stored on its own, with its own
// result.
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
	// NB: each manifest is stored even if the client goes away, as a
	// single put is: its follow-up work is queued with it.
	ctx := context.WithoutCancel(r.Context())
	var g errgroup.Group
	g.SetLimit(batchParallelism)
	for i, m := range req.Manifests {
		g.Go(func() error {
			res, err := s.storeClientManifest(ctx, m, fence)
			if err != nil {
				_, code := s.errorCode(r, err)
				out.Results[i] = shardrpc.PutResult{Code: code, Message: err.Error()}
				return nil
			}
			cur := res.Current.Version
			out.Results[i] = shardrpc.PutResult{Stored: res.Stored, Current: &cur,
				Replaced: res.Stored && res.Replaced != nil, Held: res.Held}
			return nil
		})
	}
	g.Wait()
	shardrpc.WriteJSON(w, http.StatusOK, out)
}

// storeClientManifest stores m, a client's write fenced by the key's
// lease (fence: the holder, or shardrpc.NoLease; shardrpc.Unfenced: an
// internal write, stored without a check as a single put without the
// lease parameter is), and queues its
// follow-up work. Its result's Current is the key's current version after
// the write, which is newer than m when a newer write got there first.
func (s *Server) storeClientManifest(ctx context.Context, m *metadata.Manifest, fence string) (metadata.PutResult, error) {
	if m == nil {
		return metadata.PutResult{}, fmt.Errorf("%w: no manifest", shardrpc.ErrBadRequest)
	}
	if fence == shardrpc.Unfenced {
		return s.storeManifest(ctx, m)
	}
	done, err := s.leases.admit(shardrpc.LeaseName(m.Bucket, m.Key), fence, s.now())
	if err != nil {
		return metadata.PutResult{}, err
	}
	defer done()
	return s.storeManifest(ctx, m)
}
