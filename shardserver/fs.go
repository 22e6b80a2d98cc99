package shardserver

import (
	"io"
	"io/fs"
	"os"
)

// FS is the file-system seam of the shard store: every disk touch of shard
// files goes through it, so tests can inject failures (a failing Sync, a
// Rename that never happens) and check that nothing half-written becomes
// visible. Errors for missing files must satisfy errors.Is(err,
// fs.ErrNotExist).
type FS interface {
	// Create creates name exclusively (it must not exist) for writing.
	Create(name string) (File, error)
	// Open opens name read-only.
	Open(name string) (File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	MkdirAll(dir string) error
	ReadDir(dir string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the directory's entries (creates, renames) durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.Writer
	io.ReaderAt
	io.WriterAt
	io.Closer
	Sync() error
	Stat() (fs.FileInfo, error)
}

// OSFS is the FS of the operating system.
type OSFS struct{}

var _ FS = OSFS{}

// Create creates the named file for reading and writing; it fails if the
// file exists.
func (OSFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// Open opens the named file for reading.
func (OSFS) Open(name string) (File, error) { return os.Open(name) }

// Rename renames (moves) a file, replacing newpath if it exists.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove deletes the named file.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// MkdirAll creates a directory and any missing parents.
func (OSFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o700) }

// ReadDir lists a directory, sorted by name.
func (OSFS) ReadDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }

// Stat describes the named file.
func (OSFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// SyncDir fsyncs a directory, making renames and creations in it durable.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
