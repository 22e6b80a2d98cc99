package shardserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// shardStore keeps shard files under root, named only by part ID and shard
// index: root/<first two characters of the ID, lowercased>/<ID>.<idx>.
// Names are validated by shardrpc.ValidateShardName before they get here.
type shardStore struct {
	fs        FS
	root      string
	blockSize int
}

// tmpPrefix starts every temp file name. A leading dot never starts a
// valid part ID, so temp files cannot be mistaken for shards.
const tmpPrefix = ".tmp."

func (s *shardStore) dir(fileID string) string {
	d := strings.ToLower(fileID)
	if len(d) < 2 {
		d += "_"
	}
	return filepath.Join(s.root, d[:2])
}

func (s *shardStore) path(fileID string, idx int) string {
	return filepath.Join(s.dir(fileID), fileID+"."+strconv.Itoa(idx))
}

// put streams r into shard idx of fileID and makes it durable: temp file in
// the same directory, fsync, rename over any old version, fsync directory.
// On any error nothing new is visible under the shard's name.
func (s *shardStore) put(fileID string, idx int, r io.Reader) (shardrpc.ShardInfo, error) {
	return s.putVerified(fileID, idx, r, nil)
}

// errMismatch is returned when a rebuilt shard's data is not what the
// manifest says it must be.
var errMismatch = errors.New("shardserver: rebuilt shard does not match the manifest")

// putVerified is put, except that with want set the shard only becomes
// visible if its data has exactly want's size and CRC-32C (repair stores
// rebuilt shards this way).
func (s *shardStore) putVerified(fileID string, idx int, r io.Reader, want *shardrpc.ShardInfo) (shardrpc.ShardInfo, error) {
	dir := s.dir(fileID)
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return shardrpc.ShardInfo{}, err
	}
	tmp := filepath.Join(dir, tmpPrefix+fileID+"."+strconv.Itoa(idx)+"."+hex.EncodeToString(rnd[:]))
	f, err := s.fs.Create(tmp)
	if errors.Is(err, fs.ErrNotExist) {
		if err := s.mkdir(dir); err != nil {
			return shardrpc.ShardInfo{}, err
		}
		f, err = s.fs.Create(tmp)
	}
	if err != nil {
		return shardrpc.ShardInfo{}, fmt.Errorf("shardserver: create %s: %w", tmp, err)
	}
	info, err := writeShard(f, r, s.blockSize)
	if err == nil && want != nil && info != *want {
		err = fmt.Errorf("%w: got %d bytes with CRC %08x, want %d bytes with CRC %08x", errMismatch, info.Size, info.CRC, want.Size, want.CRC)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, s.path(fileID, idx))
	}
	if err != nil {
		_ = s.fs.Remove(tmp) // NB: best effort; the orphan sweep removes old temp files
		return shardrpc.ShardInfo{}, fmt.Errorf("shardserver: write shard %s.%d: %w", fileID, idx, err)
	}
	if err := s.fs.SyncDir(dir); err != nil {
		return shardrpc.ShardInfo{}, fmt.Errorf("shardserver: write shard %s.%d: sync dir: %w", fileID, idx, err)
	}
	return info, nil
}

// mkdir creates a shard directory and makes its entry in root durable, so
// a shard renamed into it survives a crash.
func (s *shardStore) mkdir(dir string) error {
	if err := s.fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("shardserver: mkdir %s: %w", dir, err)
	}
	if err := s.fs.SyncDir(s.root); err != nil {
		return fmt.Errorf("shardserver: sync %s: %w", s.root, err)
	}
	return nil
}

// open opens shard idx of fileID with its header checked. Errors wrap
// fs.ErrNotExist or errCorrupt where they apply. The caller closes sf.f.
func (s *shardStore) open(fileID string, idx int) (*shardFile, error) {
	f, err := s.fs.Open(s.path(fileID, idx))
	if err != nil {
		return nil, fmt.Errorf("shardserver: open shard %s.%d: %w", fileID, idx, err)
	}
	sf, err := openShardFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shardserver: open shard %s.%d: %w", fileID, idx, err)
	}
	return sf, nil
}

func (s *shardStore) stat(fileID string, idx int) (shardrpc.ShardInfo, error) {
	sf, err := s.open(fileID, idx)
	if err != nil {
		return shardrpc.ShardInfo{}, err
	}
	defer sf.f.Close()
	return sf.info(), nil
}

// remove deletes shard idx of fileID; an absent shard is not an error.
// NB: the directory is not synced. A delete lost in a crash leaves a file
// no manifest wants, which the orphan sweep removes later.
func (s *shardStore) remove(fileID string, idx int) error {
	err := s.fs.Remove(s.path(fileID, idx))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("shardserver: remove shard %s.%d: %w", fileID, idx, err)
	}
	return nil
}

// storedFile is one file found by walk.
type storedFile struct {
	path    string
	fileID  string // empty for temp files and names that are not shards
	idx     int
	temp    bool
	modTime time.Time
}

// walk calls fn for every file under root. It stops at fn's first error.
func (s *shardStore) walk(fn func(storedFile) error) error {
	dirs, err := s.fs.ReadDir(s.root)
	if err != nil {
		return fmt.Errorf("shardserver: list %s: %w", s.root, err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := filepath.Join(s.root, d.Name())
		ents, err := s.fs.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("shardserver: list %s: %w", dir, err)
		}
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since ReadDir
			}
			if err != nil {
				return fmt.Errorf("shardserver: stat %s: %w", e.Name(), err)
			}
			sf := storedFile{path: filepath.Join(dir, e.Name()), modTime: info.ModTime()}
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				sf.temp = true
			} else if id, idxs, ok := strings.Cut(e.Name(), "."); ok {
				if idx, err := shardrpc.ParseShardIdx(id, idxs); err == nil {
					sf.fileID, sf.idx = id, idx
				}
			}
			if err := fn(sf); err != nil {
				return err
			}
		}
	}
	return nil
}
