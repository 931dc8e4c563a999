package nodelet

import (
	"encoding/json"
	"fmt"

	"github.com/nodelet/nodelet/internal/checkpoint"
)

// Errors of Checkpoints.Load, to test with errors.Is.
var (
	// ErrCheckpointNotFound: nothing is stored under the key.
	ErrCheckpointNotFound = checkpoint.ErrCheckpointNotFound
	// ErrCorruptCheckpoint: what was stored does not verify (truncated,
	// edited, bit rot). The file has been moved aside; rebuild the value.
	ErrCorruptCheckpoint = checkpoint.ErrCorruptCheckpoint
	// ErrInvalidKey: the key cannot name a file of the store.
	ErrInvalidKey = checkpoint.ErrInvalidKey
)

// Checkpoints stores a reconciler's values on the node's disk, by key, so
// that they survive a restart of nodelet. A value is stored as JSON in a
// checksummed envelope, one file per key (mode 0600, in a 0700 directory of
// the reconciler's own), written to a temporary file, fsync'd and renamed,
// so a crash leaves the old value or the new one, never a mix. Keys are
// file names: 1 to 200 ASCII letters, digits, '.', '_' and '-', not starting
// with '.' (an invalid key is an error wrapping ErrInvalidKey). Safe for
// concurrent use; writes of one key are last writer wins.
type Checkpoints struct {
	store *checkpoint.FileStore
}

// OpenCheckpoints opens (creating it, mode 0700) a store in dir, outside
// any node: for tests of a reconciler, and for tools that read what a
// reconciler stored. A reconciler uses Node.Checkpoints.
func OpenCheckpoints(dir string) (*Checkpoints, error) {
	store, err := checkpoint.NewFileStore(dir)
	if err != nil {
		return nil, err
	}
	return &Checkpoints{store: store}, nil
}

// Save stores value (anything encoding/json encodes) under key.
func (c *Checkpoints) Save(key string, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("encoding checkpoint %q: %w", key, err)
	}
	return c.store.CreateCheckpoint(key, checkpoint.NewData(json.RawMessage(raw)))
}

// Load decodes the value stored under key into out (a pointer). It returns
// an error wrapping ErrCheckpointNotFound or ErrCorruptCheckpoint when there
// is no usable value.
func (c *Checkpoints) Load(key string, out any) error {
	data := checkpoint.NewData(json.RawMessage(nil))
	if err := c.store.GetCheckpoint(key, data); err != nil {
		return err
	}
	if err := json.Unmarshal(data.Value, out); err != nil {
		return fmt.Errorf("decoding checkpoint %q: %w", key, err)
	}
	return nil
}

// Remove deletes the value under key; removing a missing key is no error.
func (c *Checkpoints) Remove(key string) error { return c.store.RemoveCheckpoint(key) }

// Keys lists the stored keys.
func (c *Checkpoints) Keys() ([]string, error) { return c.store.ListCheckpoints() }
