package shardserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// repairStore stores a rebuilt shard streamed by a relayer or the last
// hop of a PUSH chain. Unlike a shard PUT it knows what the shard must be:
// a stream of the wrong size or CRC never becomes visible.
func (s *Server) repairStore(w http.ResponseWriter, r *http.Request) {
	fileID, idx, ok := s.shardName(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	size, err1 := strconv.ParseInt(q.Get(shardrpc.ParamSize), 10, 64)
	crc, err2 := strconv.ParseUint(q.Get(shardrpc.ParamCRC), 10, 32)
	if err1 != nil || err2 != nil || size < 0 {
		s.fail(w, r, fmt.Errorf("%w: store needs %s and %s", shardrpc.ErrBadRequest, shardrpc.ParamSize, shardrpc.ParamCRC))
		return
	}
	info, err := s.shards.putVerified(fileID, idx, r.Body, &shardrpc.ShardInfo{Size: size, CRC: uint32(crc)})
	if errors.Is(err, errMismatch) {
		s.log.Error("rebuilt shard rejected", "file", fileID, "idx", idx, "err", err)
		shardrpc.WriteError(w, http.StatusConflict, shardrpc.CodeCorrupt, err.Error())
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.m.shardWrites.Inc()
	s.m.shardWriteBytes.Add(float64(info.Size))
	s.dataPath.Add(2 * info.Size)
	s.written.Add(info.Size)
	s.rep.received.WithLabelValues("store").Add(float64(info.Size))
	shardrpc.WriteJSON(w, http.StatusOK, info)
}
