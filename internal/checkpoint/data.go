package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MigrateFunc converts the data of a checkpoint from one version to the next
// (from the version it is registered under in Schema.Migrations to that
// version plus one). It receives and returns JSON.
type MigrateFunc func(data json.RawMessage) (json.RawMessage, error)

// Schema describes the current version of a checkpoint payload and how to bring
// older versions forward. Declare one per payload type, once, and share it.
type Schema struct {
	// Version is the version written by MarshalCheckpoint; 0 means 1.
	Version int
	// Migrations maps a version v (1 <= v < Version) to the function that
	// converts data of version v to version v+1. Reading a version with no
	// complete chain of migrations up to Version fails with
	// ErrUnsupportedVersion.
	Migrations map[int]MigrateFunc
}

func (s *Schema) version() int {
	if s == nil || s.Version == 0 {
		return 1
	}
	return s.Version
}

// Data is a Checkpoint holding a value of type T, encoded as JSON in a
// versioned, checksummed envelope:
//
//	{"version":N,"data":<JSON of Value>,"checksum":"<hex>"}
//
// The checksum is the hex SHA-256 of the decimal version, a newline, and the
// canonical encoding of data: data decoded and re-encoded with object keys
// sorted, no insignificant white space and numbers kept as written. It thus
// depends on the JSON document, not on the Go type that produced it: fields
// may be added to T without invalidating files written before, and a file
// whose version was altered does not verify.
//
// The zero Data reads and writes version 1. Use Schema for later versions.
// A Data is not safe for concurrent use.
type Data[T any] struct {
	// Value is the payload.
	Value T
	// Schema gives the version to write and the migrations to apply when
	// reading older versions; nil means version 1 with no migrations.
	Schema *Schema

	// canonical, version and checksum describe the envelope last marshaled or
	// unmarshaled (after migration).
	canonical    []byte
	version      int
	checksum     string
	migratedFrom int
}

// NewData returns a version-1 checkpoint holding v.
func NewData[T any](v T) *Data[T] {
	return &Data[T]{Value: v}
}

// envelope is the stored form of Data. Data is kept raw so that the checksum
// is computed over what was stored, not over a Go value.
type envelope struct {
	Version  int             `json:"version"`
	Data     json.RawMessage `json:"data"`
	Checksum string          `json:"checksum"`
}

// MarshalCheckpoint encodes Value in an envelope of the schema's version.
func (d *Data[T]) MarshalCheckpoint() ([]byte, error) {
	version := d.Schema.version()
	if version < 1 {
		return nil, fmt.Errorf("marshaling checkpoint: schema version %d is not positive", version)
	}
	raw, err := json.Marshal(d.Value)
	if err != nil {
		return nil, fmt.Errorf("marshaling checkpoint data: %w", err)
	}
	canonical, err := canonicalJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("marshaling checkpoint data: %w", err)
	}
	sum := checksum(version, canonical)
	out, err := json.Marshal(envelope{Version: version, Data: canonical, Checksum: sum})
	if err != nil {
		return nil, fmt.Errorf("marshaling checkpoint envelope: %w", err)
	}
	d.canonical, d.version, d.checksum, d.migratedFrom = canonical, version, sum, 0
	return out, nil
}

// UnmarshalCheckpoint decodes b into Value after verifying its checksum,
// applying the schema's migrations if b holds an older version. Errors match
// ErrCorruptCheckpoint, or ErrUnsupportedVersion for a version newer than the
// schema's or older with no migration path.
func (d *Data[T]) UnmarshalCheckpoint(b []byte) error {
	d.canonical, d.version, d.checksum, d.migratedFrom = nil, 0, "", 0
	var zero T
	d.Value = zero

	env, err := decodeEnvelope(b)
	if err != nil {
		return err
	}
	want := d.Schema.version()
	if env.Version > want {
		return fmt.Errorf("%w: found version %d, this reader supports up to %d", ErrUnsupportedVersion, env.Version, want)
	}
	canonical, err := canonicalJSON(env.Data)
	if err != nil {
		return fmt.Errorf("%w: data: %w", ErrCorruptCheckpoint, err)
	}
	if got := checksum(env.Version, canonical); got != env.Checksum {
		return fmt.Errorf("%w: checksum mismatch: stored %s, computed %s", ErrCorruptCheckpoint, env.Checksum, got)
	}
	version := env.Version
	if version < want {
		if canonical, err = d.migrate(version, want, canonical); err != nil {
			return err
		}
		d.migratedFrom = version
		version = want
	}
	if err := json.Unmarshal(canonical, &d.Value); err != nil {
		d.Value = zero
		return fmt.Errorf("%w: decoding version %d data into %T: %w", ErrCorruptCheckpoint, version, d.Value, err)
	}
	d.canonical, d.version, d.checksum = canonical, version, checksum(version, canonical)
	return nil
}

// migrate brings canonical data of version from up to version to.
func (d *Data[T]) migrate(from, to int, data []byte) ([]byte, error) {
	for v := from; v < to; v++ {
		var fn MigrateFunc
		if d.Schema != nil {
			fn = d.Schema.Migrations[v]
		}
		if fn == nil {
			return nil, fmt.Errorf("%w: found version %d, no migration from version %d to %d", ErrUnsupportedVersion, from, v, v+1)
		}
		out, err := fn(data)
		if err != nil {
			return nil, fmt.Errorf("%w: migrating data from version %d to %d: %w", ErrCorruptCheckpoint, v, v+1, err)
		}
		if data, err = canonicalJSON(out); err != nil {
			return nil, fmt.Errorf("%w: migrating data from version %d to %d: result: %w", ErrCorruptCheckpoint, v, v+1, err)
		}
	}
	return data, nil
}

// VerifyChecksum reports whether the envelope last marshaled or unmarshaled
// matches its checksum. After a migration that is the migrated envelope.
func (d *Data[T]) VerifyChecksum() error {
	if d.checksum == "" {
		return fmt.Errorf("%w: no checksum: the checkpoint was neither marshaled nor unmarshaled", ErrCorruptCheckpoint)
	}
	if got := checksum(d.version, d.canonical); got != d.checksum {
		return fmt.Errorf("%w: checksum mismatch: stored %s, computed %s", ErrCorruptCheckpoint, d.checksum, got)
	}
	return nil
}

// Version returns the version of the envelope last marshaled or unmarshaled
// (after migration), or 0 if there was none.
func (d *Data[T]) Version() int { return d.version }

// MigratedFrom returns the version that the last UnmarshalCheckpoint migrated
// from, or 0 if it read the current version. A caller that sees a migration
// may store the checkpoint again to save migrating next time.
func (d *Data[T]) MigratedFrom() int { return d.migratedFrom }

// decodeEnvelope parses b strictly: one JSON object with a positive version,
// data present, a SHA-256 hex checksum, and nothing after it.
func decodeEnvelope(b []byte) (envelope, error) {
	var env envelope
	if len(bytes.TrimSpace(b)) == 0 {
		return env, fmt.Errorf("%w: empty", ErrCorruptCheckpoint)
	}
	// Unlike a Decoder, Unmarshal rejects anything after the first value.
	if err := json.Unmarshal(b, &env); err != nil {
		return env, fmt.Errorf("%w: decoding envelope: %w", ErrCorruptCheckpoint, err)
	}
	switch {
	case env.Version < 1:
		return env, fmt.Errorf("%w: envelope version %d is missing or not positive", ErrCorruptCheckpoint, env.Version)
	case len(env.Data) == 0:
		return env, fmt.Errorf("%w: envelope has no data", ErrCorruptCheckpoint)
	case len(env.Checksum) != hex.EncodedLen(sha256.Size):
		return env, fmt.Errorf("%w: envelope checksum %q is not a SHA-256 hex digest", ErrCorruptCheckpoint, env.Checksum)
	}
	return env, nil
}

// canonicalJSON re-encodes one JSON value with object keys sorted and no
// insignificant white space. Numbers keep their literal form, so the result
// does not depend on float formatting.
func canonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding canonical JSON: %w", err)
	}
	return out, nil
}

// checksum returns the hex SHA-256 of the version and the canonical data.
func checksum(version int, canonical []byte) string {
	h := sha256.New()
	h.Write(strconv.AppendInt(nil, int64(version), 10))
	h.Write([]byte{'\n'})
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}
