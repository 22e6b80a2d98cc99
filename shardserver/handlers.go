package shardserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// shardName parses and validates the {file}/{idx} path; on failure it
// answers 400 and returns ok=false.
func (s *Server) shardName(w http.ResponseWriter, r *http.Request) (fileID string, idx int, ok bool) {
	fileID = r.PathValue("file")
	idx, err := shardrpc.ParseShardIdx(fileID, r.PathValue("idx"))
	if err != nil {
		s.fail(w, r, err)
		return "", 0, false
	}
	return fileID, idx, true
}

func (s *Server) putShard(w http.ResponseWriter, r *http.Request) {
	fileID, idx, ok := s.shardName(w, r)
	if !ok {
		return
	}
	info, err := s.shards.put(fileID, idx, r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.m.shardWrites.Inc()
	s.m.shardWriteBytes.Add(float64(info.Size))
	s.dataPath.Add(2 * info.Size)
	s.written.Add(info.Size)
	shardrpc.WriteJSON(w, http.StatusOK, info)
}

func (s *Server) getShard(w http.ResponseWriter, r *http.Request) {
	fileID, idx, ok := s.shardName(w, r)
	if !ok {
		return
	}
	off, length, err := parseRange(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sf, err := s.shards.open(fileID, idx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer sf.f.Close()
	if length < 0 {
		length = sf.size - off
	}
	if off > sf.size || length < 0 || off+length > sf.size {
		s.fail(w, r, fmt.Errorf("%w: range %d+%d outside shard of %d bytes", shardrpc.ErrBadRequest, off, length, sf.size))
		return
	}
	if r.URL.Query().Get(shardrpc.ParamFramed) == "1" {
		s.getShardFramed(w, r, sf, fileID, idx, off, length)
		return
	}
	rr := sf.rangeReader(off, length)
	defer rr.Close()
	// NB: verify the first block before any header goes out, so the common
	// case of a bad shard is a clean 409 the client can act on at once.
	piece, err := rr.Next()
	if err != nil && err != io.EOF {
		s.fail(w, r, fmt.Errorf("shard %s.%d: %w", fileID, idx, err))
		return
	}
	h := w.Header()
	h.Set("Trailer", shardrpc.TrailerError)
	h.Set(shardrpc.HeaderLength, strconv.FormatInt(length, 10))
	h.Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	s.m.shardReads.Inc()
	for err == nil {
		n, werr := w.Write(piece)
		s.m.shardReadBytes.Add(float64(n))
		s.dataPath.Add(2 * int64(n))
		if werr != nil {
			return // the client went away
		}
		piece, err = rr.Next()
	}
	if err == io.EOF {
		return
	}
	// Mid-stream failure: end the body early and say why in the trailer.
	if errors.Is(err, errCorrupt) {
		s.m.checksumFailures.Inc()
		s.log.Error("checksum failure mid-stream", "file", fileID, "idx", idx, "err", err)
		h.Set(shardrpc.TrailerError, shardrpc.TrailerCorrupt)
		return
	}
	s.log.Error("shard read failed mid-stream", "file", fileID, "idx", idx, "err", err)
	h.Set(shardrpc.TrailerError, "io")
}

// getShardFramed answers a framed shard GET (shardrpc.ParamFramed): the
// file's blocks that hold [off, off+length), each with its CRC, as stored,
// which the client checks (internal/shardrpc/frames.go). Only the first
// block is checked here, so that a bad shard is still a 409 before any
// body; the rest goes from the page cache to the socket (sendfile, where
// the file and the connection allow it), without a read into this
// process, a CRC or a write per block.
func (s *Server) getShardFramed(w http.ResponseWriter, r *http.Request, sf *shardFile, fileID string, idx int, off, length int64) {
	bs := int64(sf.hdr.blockSize)
	n := shardrpc.FramedLength(bs, sf.size, off, length)
	var start int64
	if length > 0 {
		first := off / bs
		start = headerSize + first*(bs+blockCRCSize)
		bp := getSpanBuf(bs + blockCRCSize)
		_, err := sf.block(first, *bp)
		putSpanBuf(bp)
		if err != nil {
			s.fail(w, r, fmt.Errorf("shard %s.%d: %w", fileID, idx, err))
			return
		}
	}
	h := w.Header()
	h.Set(shardrpc.HeaderLength, strconv.FormatInt(length, 10))
	h.Set(shardrpc.HeaderSize, strconv.FormatInt(sf.size, 10))
	h.Set(shardrpc.HeaderBlockSize, strconv.FormatInt(bs, 10))
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	h.Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	s.m.shardReads.Inc()
	if n == 0 {
		return
	}
	var sent int64
	var err error
	if seeker, ok := sf.f.(io.Seeker); ok {
		// NB: sendfile(2) sends from the file's own offset, and net/http
		// hands the connection a *io.LimitedReader over the file.
		if _, err = seeker.Seek(start, io.SeekStart); err == nil {
			sent, err = io.Copy(bodyWriter(w), &io.LimitedReader{R: sf.f, N: n})
		}
	} else {
		sent, err = io.Copy(bodyWriter(w), io.NewSectionReader(sf.f, start, n))
	}
	data := length * sent / n // NB: the share of the range's data sent
	s.m.shardReadBytes.Add(float64(data))
	s.dataPath.Add(2 * data)
	if err != nil && r.Context().Err() == nil {
		s.log.Debug("framed shard read ended early", "file", fileID, "idx", idx, "sent", sent, "of", n, "err", err)
	}
}

// bodyWriter returns the writer under w's wrappers that takes a reader
// at once (net/http's, which passes a file to the connection's
// sendfile), or w itself. The wrappers (metrics, panic recovery) have
// seen the header go out; the body's bytes are not theirs to count.
func bodyWriter(w http.ResponseWriter) io.Writer {
	for x := w; ; {
		if _, ok := x.(io.ReaderFrom); ok {
			return x
		}
		u, ok := x.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		x = u.Unwrap()
	}
}

// parseRange reads the offset and length query parameters.
func parseRange(r *http.Request) (off, length int64, err error) {
	q := r.URL.Query()
	length = -1
	if v := q.Get(shardrpc.ParamOffset); v != "" {
		if off, err = strconv.ParseInt(v, 10, 64); err != nil || off < 0 {
			return 0, 0, fmt.Errorf("%w: bad offset %q", shardrpc.ErrBadRequest, v)
		}
	}
	if v := q.Get(shardrpc.ParamLength); v != "" {
		if length, err = strconv.ParseInt(v, 10, 64); err != nil || length < -1 {
			return 0, 0, fmt.Errorf("%w: bad length %q", shardrpc.ErrBadRequest, v)
		}
	}
	return off, length, nil
}

func (s *Server) statShard(w http.ResponseWriter, r *http.Request) {
	fileID, idx, ok := s.shardName(w, r)
	if !ok {
		return
	}
	info, err := s.shards.stat(fileID, idx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set(shardrpc.HeaderSize, strconv.FormatInt(info.Size, 10))
	w.Header().Set(shardrpc.HeaderCRC, strconv.FormatUint(uint64(info.CRC), 10))
	w.WriteHeader(http.StatusOK)
}

// deleteShard removes a shard file: a failed PUT's or repair's leftovers.
// A shard that a version under object lock places here is refused
// (ErrLocked), whoever asks: no legitimate caller deletes a kept
// version's shard, and a holder of the cluster secret must not remove a
// locked version's data under its manifest.
func (s *Server) deleteShard(w http.ResponseWriter, r *http.Request) {
	fileID, idx, ok := s.shardName(w, r)
	if !ok {
		return
	}
	locked, err := s.holdsWhere(r.Context(), fileID, idx, func(m *metadata.Manifest) bool { return m.Lock.Retained(s.now()) })
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if locked {
		s.fail(w, r, fmt.Errorf("%w: shard %s/%d of a locked version", metadata.ErrLocked, fileID, idx))
		return
	}
	if err := s.shards.remove(fileID, idx); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) putManifest(w http.ResponseWriter, r *http.Request) {
	var m metadata.Manifest
	if err := s.decode(w, r, &m); err != nil {
		s.fail(w, r, err)
		return
	}
	if fence := r.URL.Query().Get(shardrpc.ParamLease); fence != "" {
		done, err := s.leases.admit(shardrpc.LeaseName(m.Bucket, m.Key), fence, s.now())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer done()
	}
	res, err := s.storeManifest(r.Context(), &m)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.PutManifestResponse{Stored: res.Stored, Current: res.Current.Version,
		Replaced: res.Stored && res.Replaced != nil, Held: res.Held})
}

func (s *Server) getManifest(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bucket, key := q.Get(shardrpc.ParamBucket), q.Get(shardrpc.ParamKey)
	if bucket == "" || key == "" {
		s.fail(w, r, fmt.Errorf("%w: bucket and key are required", shardrpc.ErrBadRequest))
		return
	}
	m, err := s.meta.GetManifest(r.Context(), bucket, key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shardrpc.WriteJSON(w, http.StatusOK, m)
}

func (s *Server) getManifestVersions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bucket, key := q.Get(shardrpc.ParamBucket), q.Get(shardrpc.ParamKey)
	if bucket == "" || key == "" {
		s.fail(w, r, fmt.Errorf("%w: bucket and key are required", shardrpc.ErrBadRequest))
		return
	}
	inline := q.Get(shardrpc.ParamInline) != "0"
	if q.Get(shardrpc.ParamFormat) == shardrpc.FormatBinary {
		// NB: the stored JSON goes out as it is: no decode, no encode.
		lk, err := s.meta.LookupRaw(r.Context(), bucket, key, inline)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		shardrpc.WriteVersions(w, []shardrpc.RawKeyVersions{shardrpc.RawAnswer(lk, nil)})
		return
	}
	lk, err := s.meta.Lookup(r.Context(), bucket, key, inline)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !inline {
		for _, p := range lk.Previous {
			p.Inline = nil
		}
	}
	if lk.Previous == nil {
		lk.Previous = []*metadata.Manifest{}
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.ManifestVersionsResponse{Current: lk.Current, Previous: lk.Previous})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lq := metadata.ListQuery{
		Bucket:    q.Get(shardrpc.ParamBucket),
		Prefix:    q.Get(shardrpc.ParamPrefix),
		Delimiter: q.Get(shardrpc.ParamDelimiter),
		After:     q.Get(shardrpc.ParamAfter),
		Unsure:    q.Get(shardrpc.ParamUnsure) == "1",
	}
	if v := q.Get(shardrpc.ParamLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: bad limit %q", shardrpc.ErrBadRequest, v))
			return
		}
		lq.Limit = n
	}
	es, truncated, err := s.meta.List(r.Context(), lq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shardrpc.WriteList(w, r, es, truncated)
}

func (s *Server) putBucket(w http.ResponseWriter, r *http.Request) {
	var b metadata.Bucket
	if err := s.decode(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	// A fenced write (a gateway's read-modify-write of the record) lands
	// only while its writer holds the record's lease; unfenced ones
	// (bucket creation) are not checked.
	if fence := r.URL.Query().Get(shardrpc.ParamLease); fence != "" {
		done, err := s.leases.admit(shardrpc.BucketLeaseName(b.Name), fence, s.now())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer done()
	}
	stored, err := s.meta.PutBucket(r.Context(), &b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.PutBucketResponse{Stored: stored})
}

func (s *Server) listBuckets(w http.ResponseWriter, r *http.Request) {
	bs, err := s.meta.ListBuckets(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if bs == nil {
		bs = []metadata.Bucket{}
	}
	shardrpc.WriteJSON(w, http.StatusOK, bs)
}

func (s *Server) putAccessKey(w http.ResponseWriter, r *http.Request) {
	var k metadata.AccessKey
	if err := s.decode(w, r, &k); err != nil {
		s.fail(w, r, err)
		return
	}
	// A fenced write (a gateway's change of the key under its record's
	// lease, or a creation under its name's lease) lands only while its
	// writer holds that lease; unfenced ones (gateways of an older
	// version) are not checked.
	if q := r.URL.Query(); q.Get(shardrpc.ParamLease) != "" {
		name := shardrpc.AccessKeyLeaseName(k.ID)
		if q.Get(shardrpc.ParamLeaseOf) == shardrpc.LeaseOfName {
			name = shardrpc.AccessKeyNameLeaseName(k.Name)
		}
		done, err := s.leases.admit(name, q.Get(shardrpc.ParamLease), s.now())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer done()
	}
	stored, err := s.meta.PutAccessKey(r.Context(), &k)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.PutBucketResponse{Stored: stored})
}

func (s *Server) listAccessKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.meta.ListAccessKeys(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ks == nil {
		ks = []metadata.AccessKey{}
	}
	shardrpc.WriteJSON(w, http.StatusOK, ks)
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.meta.Stats(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	uploads, err := s.meta.CountUploads(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	used, free, err := diskUsage(s.cfg.DataDir)
	if err != nil {
		s.log.Warn("disk usage", "err", err)
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.Stats{
		NodeID: s.cfg.NodeID, Objects: st.Objects, Tombstones: st.Tombstones, Bytes: st.Bytes, Shards: st.Shards, Inline: st.Inline, Uploads: uploads,
		Previous: st.Previous, PreviousBytes: st.PreviousBytes, PreviousShards: st.PreviousShards,
		TombstoneJobs: st.TombstoneJobs, TombstonesCollected: st.TombstonesCollected, TombstoneChecksBlocked: s.tombBlocked.Load(),
		DiskUsedBytes: used, DiskFreeBytes: free,
	})
}

// decode reads a JSON request body of bounded size into v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxJSONBody))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: decode body: %w", shardrpc.ErrBadRequest, err)
	}
	return nil
}

// fail answers err with the status and code its kind maps to.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := s.errorCode(r, err)
	shardrpc.WriteError(w, status, code, err.Error())
}

// errorCode maps err to the status and code of its kind, logging it as
// its kind deserves.
func (s *Server) errorCode(r *http.Request, err error) (status int, code string) {
	status, code = http.StatusInternalServerError, shardrpc.CodeInternal
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, metadata.ErrNotFound):
		status, code = http.StatusNotFound, shardrpc.CodeNotFound
	case errors.Is(err, errCorrupt):
		status, code = http.StatusConflict, shardrpc.CodeCorrupt
		s.m.checksumFailures.Inc()
		s.log.Error("shard corrupt", "path", r.URL.Path, "err", err)
	case errors.Is(err, shardrpc.ErrLeaseHeld):
		status, code = http.StatusConflict, shardrpc.CodeLeaseHeld
	case errors.Is(err, metadata.ErrLocked):
		status, code = http.StatusConflict, shardrpc.CodeLocked
		s.log.Warn("refused: object lock", "method", r.Method, "path", r.URL.Path, "err", err)
	case errors.Is(err, shardrpc.ErrBadRequest), errors.Is(err, errBody), errors.Is(err, metadata.ErrInvalidUpload),
		errors.Is(err, metadata.ErrInvalidManifest), errors.Is(err, metadata.ErrInvalidBucket),
		errors.Is(err, metadata.ErrInvalidAccessKey), errors.Is(err, metadata.ErrInvalidQuery):
		status, code = http.StatusBadRequest, shardrpc.CodeBadRequest
		s.log.Debug("bad request", "method", r.Method, "path", r.URL.Path, "err", err)
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	return status, code
}
