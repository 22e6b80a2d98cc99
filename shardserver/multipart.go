package shardserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Multipart upload state lives beside the data: the upload record and the
// part records sit on the upload's placement servers, written by gateways
// with the same quorum rule as manifests.

func (s *Server) putUpload(w http.ResponseWriter, r *http.Request) {
	var u metadata.Upload
	if err := s.decode(w, r, &u); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.meta.PutUpload(r.Context(), &u); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) getUpload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	u, err := s.meta.GetUpload(r.Context(), q.Get(shardrpc.ParamBucket), q.Get(shardrpc.ParamKey), q.Get(shardrpc.ParamUpload))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shardrpc.WriteJSON(w, http.StatusOK, u)
}

func (s *Server) listUploads(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	uq := metadata.UploadQuery{
		Bucket: q.Get(shardrpc.ParamBucket), Prefix: q.Get(shardrpc.ParamPrefix),
		KeyMarker: q.Get(shardrpc.ParamKeyMarker), IDMarker: q.Get(shardrpc.ParamIDMarker),
	}
	if v := q.Get(shardrpc.ParamLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: bad limit %q", shardrpc.ErrBadRequest, v))
			return
		}
		uq.Limit = n
	}
	us, truncated, err := s.meta.ListUploads(r.Context(), uq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if us == nil {
		us = []metadata.Upload{}
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.UploadListResponse{Uploads: us, Truncated: truncated})
}

func (s *Server) putUploadPart(w http.ResponseWriter, r *http.Request) {
	var p metadata.UploadPart
	if err := s.decode(w, r, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	bucket, key := q.Get(shardrpc.ParamBucket), q.Get(shardrpc.ParamKey)
	loser, err := s.meta.PutUploadPart(r.Context(), bucket, key, &p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if loser != nil {
		// NB: the record is stored; queue the loser's shard even if the
		// gateway has gone away meanwhile.
		ctx := context.WithoutCancel(r.Context())
		if u, err := s.meta.GetUpload(ctx, bucket, key, p.UploadID); err == nil {
			s.dropParts(ctx, u, []metadata.UploadPart{*loser})
		}
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.PutPartResponse{Loser: loser})
}

func (s *Server) listUploadParts(w http.ResponseWriter, r *http.Request) {
	ps, err := s.meta.ListUploadParts(r.Context(), r.URL.Query().Get(shardrpc.ParamUpload))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ps == nil {
		ps = []metadata.UploadPart{}
	}
	shardrpc.WriteJSON(w, http.StatusOK, ps)
}

func (s *Server) finishUpload(w http.ResponseWriter, r *http.Request) {
	var fr shardrpc.FinishRequest
	if err := s.decode(w, r, &fr); err != nil {
		s.fail(w, r, err)
		return
	}
	u, dropped, err := s.meta.FinishUpload(r.Context(), fr.Bucket, fr.Key, fr.Upload, fr.Keep)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.dropParts(context.WithoutCancel(r.Context()), u, dropped)
	w.WriteHeader(http.StatusNoContent)
}

// dropParts queues for deletion this node's shards of parts no longer
// referenced. Failures are logged: the orphan sweep catches what is missed.
func (s *Server) dropParts(ctx context.Context, u *metadata.Upload, parts []metadata.UploadPart) {
	due := s.now().Add(s.cfg.GCDelay)
	for idx, id := range u.Placement {
		if id != s.cfg.NodeID {
			continue
		}
		for _, p := range parts {
			if err := s.meta.EnqueueGC(ctx, p.ID, idx, due); err != nil {
				s.log.Error("enqueue gc of part", "file", p.ID, "idx", idx, "err", err)
			}
		}
	}
}

// expireUploads aborts, on this node, uploads older than UploadMaxAge.
// Every placement server does the same for its own copy, so no
// coordination is needed: an upload that old is abandoned.
func (s *Server) expireUploads(ctx context.Context) (int, error) {
	cutoff := s.now().Add(-s.cfg.UploadMaxAge)
	done := 0
	for {
		us, err := s.meta.ExpiredUploads(ctx, cutoff, 100)
		if err != nil || len(us) == 0 {
			return done, err
		}
		for _, u := range us {
			_, dropped, err := s.meta.FinishUpload(ctx, u.Bucket, u.Key, u.ID, nil)
			if errors.Is(err, metadata.ErrNotFound) {
				continue
			}
			if err != nil {
				return done, err
			}
			s.dropParts(ctx, &u, dropped)
			s.log.Info("aborted abandoned multipart upload", "bucket", u.Bucket, "key", u.Key, "upload", u.ID, "initiated", u.Initiated, "parts", len(dropped))
			done++
		}
	}
}
