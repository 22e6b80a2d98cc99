package shardserver

import (
	"context"
	"fmt"
	"io"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// runCopy moves one shard unchanged from a server that still holds it
// (a draining one) to its new server: the shard's bytes cross the network
// once, and nothing is decoded. The source verifies its block checksums
// as it streams; the store verifies size and CRC-32C against the
// manifest's before the copy becomes visible.
func (s *Server) runCopy(ctx context.Context, req shardrpc.CopyRequest) (shardrpc.RepairReport, error) {
	g, err := s.openGroup(req.RepairGroup)
	if err != nil {
		return shardrpc.RepairReport{}, err
	}
	if err := checkSRU(req.SRU); err != nil {
		return shardrpc.RepairReport{}, err
	}
	src, t := req.Source, req.Target
	if src.Idx != t.Idx || src.Addr == "" || src.ID == t.ID || src.ID == s.cfg.NodeID {
		return shardrpc.RepairReport{}, fmt.Errorf("%w: copy of shard %d from %+v to %+v", shardrpc.ErrBadRequest, t.Idx, src, t)
	}
	if err := targetsValid(g, []int{t.Idx}, []shardrpc.RepairTarget{t}); err != nil {
		return shardrpc.RepairReport{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rep := &report{}
	in, err := s.rep.peers.GetShard(ctx, src.Addr, g.FileID, src.Idx, 0, g.size)
	if err != nil {
		return shardrpc.RepairReport{}, blame(src.ID, err)
	}
	defer in.Close()
	sinks, closeSinks := s.openSinks(ctx, g, []shardrpc.RepairTarget{t}, req.Method, rep)
	buf := make([]byte, req.SRU)
	var got int64
	for err == nil && got < g.size {
		var n int
		n, err = io.ReadFull(in, buf[:min(int64(len(buf)), g.size-got)])
		got += int64(n)
		if err != nil {
			err = blame(src.ID, err)
			break
		}
		_, err = sinks[t.Idx].Write(buf[:n])
	}
	rep.transfer(src.ID, s.cfg.NodeID, got)
	s.rep.received.WithLabelValues(req.Method).Add(float64(got))
	s.dataPath.Add(int64(got))
	if err := closeSinks(err); err != nil {
		return shardrpc.RepairReport{}, err
	}
	return rep.rep, nil
}
