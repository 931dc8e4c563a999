package checkpoint

import (
	"errors"
	"fmt"
)

// Manager stores checkpoints by key. Implementations are safe for concurrent
// use; operations on different keys do not wait for each other.
type Manager interface {
	// CreateCheckpoint stores c under key, replacing any previous value
	// atomically: after a crash the key holds either the old or the new value.
	CreateCheckpoint(key string, c Checkpoint) error
	// GetCheckpoint reads the value stored under key into c and verifies it.
	// It returns an error matching ErrCheckpointNotFound if there is none,
	// ErrCorruptCheckpoint if the stored value does not decode or verify (the
	// stored value is then moved aside and the key no longer exists), and
	// ErrUnsupportedVersion if c cannot read the stored version (the stored
	// value is left in place).
	GetCheckpoint(key string, c Checkpoint) error
	// RemoveCheckpoint deletes the value stored under key. Removing a key that
	// does not exist is not an error.
	RemoveCheckpoint(key string) error
	// ListCheckpoints returns the keys that hold a value, sorted. Temporary
	// and quarantined files are never listed.
	ListCheckpoints() ([]string, error)
}

// Checkpoint is a value that a Manager can store.
type Checkpoint interface {
	// MarshalCheckpoint returns the bytes to store, including a checksum.
	MarshalCheckpoint() ([]byte, error)
	// UnmarshalCheckpoint replaces the receiver's value with the one encoded
	// in b. An error that matches ErrUnsupportedVersion means b is valid but
	// of a version this code cannot read; a Manager keeps such a value. Any
	// other error means b is corrupt.
	UnmarshalCheckpoint(b []byte) error
	// VerifyChecksum reports whether the value last marshaled or unmarshaled
	// matches its checksum; an error means it does not.
	VerifyChecksum() error
}

var (
	// ErrCheckpointNotFound is returned when a key holds no checkpoint.
	ErrCheckpointNotFound = errors.New("checkpoint not found")
	// ErrCorruptCheckpoint is returned when a stored checkpoint cannot be
	// decoded or does not match its checksum.
	ErrCorruptCheckpoint = errors.New("corrupt checkpoint")
	// ErrUnsupportedVersion is returned when a stored checkpoint was written
	// with a version newer than the reader's, or older with no migration
	// registered to bring it forward. It does not match ErrCorruptCheckpoint:
	// the file is intact (typically written by a newer nodelet before a
	// downgrade) and is left in place; overwrite it with CreateCheckpoint once
	// the state has been rebuilt.
	ErrUnsupportedVersion = errors.New("unsupported checkpoint version")
	// ErrInvalidKey is returned for a key that is not usable as a file name
	// inside the store's directory; see ValidateKey.
	ErrInvalidKey = errors.New("invalid checkpoint key")
)

// CorruptCheckpointError describes a stored checkpoint that failed to decode or
// verify. It matches ErrCorruptCheckpoint with errors.Is, and unwraps to the
// cause.
type CorruptCheckpointError struct {
	// Key is the checkpoint's key.
	Key string
	// Path is the file that held the checkpoint.
	Path string
	// QuarantinePath is where the file was moved; empty if moving it failed.
	QuarantinePath string
	// Err is why the checkpoint was found corrupt, joined with the error that
	// prevented moving it aside, if any.
	Err error
}

func (e *CorruptCheckpointError) Error() string {
	if e.QuarantinePath == "" {
		return fmt.Sprintf("reading checkpoint %q from %s: %v", e.Key, e.Path, e.Err)
	}
	return fmt.Sprintf("reading checkpoint %q from %s (moved aside to %s): %v", e.Key, e.Path, e.QuarantinePath, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptCheckpointError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCorruptCheckpoint.
func (e *CorruptCheckpointError) Is(target error) bool { return target == ErrCorruptCheckpoint }
