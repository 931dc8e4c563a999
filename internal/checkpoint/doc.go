// Package checkpoint keeps the per-pod state that the container runtime cannot
// report (sandbox attempt, restart counts and back-off, termination progress,
// volume setup, last status written) on local disk, so that a restarted nodelet
// adopts its pods instead of recreating them. A Manager stores opaque Checkpoint
// values by key; FileStore is the implementation, one file per key in a 0700
// directory, each written to a temporary file, fsync'd, renamed over the old
// one and made durable with a directory fsync, so a crash leaves either the old
// or the new complete value. Data[T] is the Checkpoint most callers want: it
// wraps any JSON-encodable value in a versioned envelope
// {"version": N, "data": ..., "checksum": "<sha256 hex>"} whose checksum covers
// the version and a canonical re-encoding of data (sorted keys, no whitespace),
// so adding a field to a Go struct never invalidates files written before, and
// older versions are upgraded only through migrations the caller registers in a
// Schema. A file that does not verify is reported as ErrCorruptCheckpoint and
// moved aside to "<key>.corrupt-<unix nanoseconds>" for the caller to rebuild
// the state from the runtime; a file from a newer version is reported as
// ErrUnsupportedVersion and left where it is.
package checkpoint
