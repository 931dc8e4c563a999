package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/keylock"
	"github.com/nodelet/nodelet/internal/metrics"
)

const (
	dirMode  fs.FileMode = 0o700
	fileMode fs.FileMode = 0o600

	// maxFileSize bounds what GetCheckpoint reads and CreateCheckpoint
	// writes. Checkpoints hold a pod's bookkeeping, a few KiB; a file larger
	// than this is not one of ours.
	maxFileSize = 16 << 20
)

// FileStore is a Manager that keeps one file per key in a directory. Writes go
// to a temporary file in the same directory that is fsync'd and renamed over
// the key's file, then the directory is fsync'd, so a crash at any point
// leaves the old or the new complete file. Use one FileStore per directory;
// FileStore does not coordinate with other processes.
type FileStore struct {
	dir   string
	clock clock.PassiveClock
	locks keylock.Map
}

var _ Manager = (*FileStore)(nil)

// Option configures a FileStore.
type Option func(*FileStore)

// WithClock sets the clock used for quarantine file names and write latency.
func WithClock(c clock.PassiveClock) Option {
	return func(s *FileStore) { s.clock = c }
}

// NewFileStore opens the store in dir, creating dir with mode 0700 if needed
// and restricting it to 0700 if it exists with another mode. It removes
// temporary files left by a write that a crash interrupted, and registers the
// package's metrics with controller-runtime's registry.
func NewFileStore(dir string, opts ...Option) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("opening checkpoint store: directory is empty")
	}
	s := &FileStore{dir: filepath.Clean(dir), clock: clock.RealClock{}}
	for _, o := range opts {
		o(s)
	}
	if err := os.MkdirAll(s.dir, dirMode); err != nil {
		return nil, fmt.Errorf("creating checkpoint directory: %w", err)
	}
	info, err := os.Stat(s.dir)
	if err != nil {
		return nil, fmt.Errorf("opening checkpoint store: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("opening checkpoint store: %s is not a directory", s.dir)
	}
	if info.Mode().Perm() != dirMode {
		if err := os.Chmod(s.dir, dirMode); err != nil {
			return nil, fmt.Errorf("restricting checkpoint directory to mode %v: %w", dirMode, err)
		}
	}
	if err := s.removeTempFiles(); err != nil {
		return nil, fmt.Errorf("opening checkpoint store %s: %w", s.dir, err)
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *FileStore) Dir() string { return s.dir }

// CreateCheckpoint stores c under key, replacing the previous value atomically
// and durably.
func (s *FileStore) CreateCheckpoint(key string, c Checkpoint) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	b, err := c.MarshalCheckpoint()
	if err != nil {
		return fmt.Errorf("writing checkpoint %q: %w", key, err)
	}
	if len(b) > maxFileSize {
		return fmt.Errorf("writing checkpoint %q: %d bytes, more than the limit of %d", key, len(b), maxFileSize)
	}

	unlock := s.locks.Lock(key)
	defer unlock()
	start := s.clock.Now()
	if err := atomicfile.WriteFile(s.path(key), b, fileMode); err != nil {
		return fmt.Errorf("writing checkpoint %q: %w", key, err)
	}
	metrics.CheckpointWriteDuration.Observe(s.clock.Since(start).Seconds())
	return nil
}

// GetCheckpoint reads the checkpoint stored under key into c. A checkpoint that
// does not decode or verify is moved aside and reported as a
// *CorruptCheckpointError, which matches ErrCorruptCheckpoint.
func (s *FileStore) GetCheckpoint(key string, c Checkpoint) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("reading checkpoint: %w", err)
	}
	path := s.path(key)

	unlock := s.locks.Lock(key)
	defer unlock()
	b, err := readFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading checkpoint %q from %s: %w", key, path, ErrCheckpointNotFound)
	case errors.Is(err, ErrCorruptCheckpoint):
		return s.quarantine(key, err)
	case err != nil:
		return fmt.Errorf("reading checkpoint %q: %w", key, err)
	}
	if err := c.UnmarshalCheckpoint(b); err != nil {
		if errors.Is(err, ErrUnsupportedVersion) {
			return fmt.Errorf("reading checkpoint %q from %s: %w", key, path, err)
		}
		return s.quarantine(key, err)
	}
	if err := c.VerifyChecksum(); err != nil {
		return s.quarantine(key, err)
	}
	return nil
}

// readFile reads a regular file of at most maxFileSize bytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the operation and the file.
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrCorruptCheckpoint, path)
	}
	if info.Size() > maxFileSize {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorruptCheckpoint, path, maxFileSize)
	}
	// Files are replaced by rename, never rewritten in place, so an open
	// file keeps the size it had at Stat.
	b := make([]byte, info.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}

// quarantine moves the key's file aside because of cause, and returns the
// *CorruptCheckpointError describing both. The caller holds the key's lock.
func (s *FileStore) quarantine(key string, cause error) error {
	metrics.CheckpointCorrupt.Inc()
	path := s.path(key)
	cerr := &CorruptCheckpointError{Key: key, Path: path, Err: cause}
	stamp := strconv.FormatInt(s.clock.Now().UnixNano(), 10)
	dest := path + quarantineMarker + stamp
	// Two corruptions of one key within a clock tick (only with a fake clock)
	// must not overwrite the first quarantined file.
	for i := 1; ; i++ {
		if _, err := os.Lstat(dest); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dest = path + quarantineMarker + stamp + "-" + strconv.Itoa(i)
	}
	if err := os.Rename(path, dest); err != nil {
		cerr.Err = errors.Join(cause, fmt.Errorf("moving corrupt checkpoint aside: %w", err))
		return cerr
	}
	cerr.QuarantinePath = dest
	if err := os.Chmod(dest, fileMode); err != nil {
		cerr.Err = errors.Join(cause, fmt.Errorf("restricting mode of %s: %w", dest, err))
	}
	if err := atomicfile.SyncDir(s.dir); err != nil {
		cerr.Err = errors.Join(cerr.Err, fmt.Errorf("moving corrupt checkpoint aside: %w", err))
	}
	return cerr
}

// RemoveCheckpoint deletes the checkpoint stored under key, if any.
func (s *FileStore) RemoveCheckpoint(key string) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("removing checkpoint: %w", err)
	}
	unlock := s.locks.Lock(key)
	defer unlock()
	if err := os.Remove(s.path(key)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("removing checkpoint %q: %w", key, err)
	}
	if err := atomicfile.SyncDir(s.dir); err != nil {
		return fmt.Errorf("removing checkpoint %q: %w", key, err)
	}
	return nil
}

// ListCheckpoints returns the keys of the stored checkpoints, sorted.
func (s *FileStore) ListCheckpoints() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("listing checkpoints: %w", err)
	}
	keys := make([]string, 0, len(entries))
	for _, e := range entries {
		// Temporary files start with '.', quarantined ones contain the
		// quarantine marker: neither is a valid key.
		if e.Type().IsRegular() && ValidateKey(e.Name()) == nil {
			keys = append(keys, e.Name())
		}
	}
	return keys, nil
}

// removeTempFiles deletes the temporary files of interrupted writes.
func (s *FileStore) removeTempFiles() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("listing temporary files: %w", err)
	}
	removed := false
	for _, e := range entries {
		if !atomicfile.IsTemp(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing temporary file: %w", err)
		}
		removed = true
	}
	if removed {
		return atomicfile.SyncDir(s.dir)
	}
	return nil
}

func (s *FileStore) path(key string) string { return filepath.Join(s.dir, key) }
