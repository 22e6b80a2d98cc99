package shardserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// Draining. An operator drains a shard server before removing it: the
// server keeps serving reads and helping repairs, but takes no new shards,
// and the repair workers move the shards it holds elsewhere. The flag is
// the server's own, like its node ID: it lives in its data dir (so a
// restart keeps draining) and is advertised in its gossip meta (so every
// gateway and repair worker sees it). POST shardrpc.PathDrain sets it.

const drainFile = "draining"

// LoadDraining reports whether the server with this data dir was left
// draining.
func LoadDraining(dataDir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dataDir, drainFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("shardserver: read drain flag: %w", err)
}

// saveDraining persists the flag durably: the file exists exactly while
// the server drains.
func saveDraining(dataDir string, draining bool) error {
	path := filepath.Join(dataDir, drainFile)
	osfs := OSFS{}
	if draining {
		if err := writeFileSync(osfs, path, []byte("draining: this server's shards are being moved elsewhere\n")); err != nil {
			return err
		}
	} else if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return osfs.SyncDir(dataDir)
}

// drain answers POST shardrpc.PathDrain: persist the flag, then advertise
// it through Config.OnDrain. Persisting first means a crash in between
// comes back with the flag the operator asked for.
func (s *Server) drain(w http.ResponseWriter, r *http.Request) {
	var req shardrpc.DrainRequest
	if err := s.decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	was, err := LoadDraining(s.cfg.DataDir)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := saveDraining(s.cfg.DataDir, req.Draining); err != nil {
		s.fail(w, r, fmt.Errorf("shardserver: save drain flag: %w", err))
		return
	}
	if s.cfg.OnDrain != nil {
		if err := s.cfg.OnDrain(req.Draining); err != nil {
			s.fail(w, r, fmt.Errorf("shardserver: advertise drain flag: %w", err))
			return
		}
	}
	if was != req.Draining {
		s.log.Info("drain flag changed", "draining", req.Draining)
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.DrainResponse{NodeID: s.cfg.NodeID, Draining: req.Draining, Changed: was != req.Draining})
}
