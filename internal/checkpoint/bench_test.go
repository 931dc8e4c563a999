package checkpoint

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// benchState is a pod checkpoint of realistic shape.
type benchState struct {
	UID      string            `json:"uid"`
	Attempt  int               `json:"attempt"`
	Restarts map[string]int    `json:"restarts"`
	Notes    map[string]string `json:"notes"`
}

// newBenchState returns a value whose envelope is about size bytes.
func newBenchState(b *testing.B, uid string, size int) *Data[benchState] {
	b.Helper()
	v := benchState{UID: uid, Attempt: 3, Restarts: map[string]int{"app": 2, "sidecar": 0}, Notes: map[string]string{}}
	enc, err := NewData(v).MarshalCheckpoint()
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; len(enc) < size; i++ {
		v.Notes[fmt.Sprintf("n%03d", i)] = strings.Repeat("x", min(64, size-len(enc)))
		if enc, err = NewData(v).MarshalCheckpoint(); err != nil {
			b.Fatal(err)
		}
	}
	return NewData(v)
}

// BenchmarkCreateCheckpoint2KiB measures one durable write of a 2 KiB
// checkpoint over an existing one: marshal, temp file, fsync, rename,
// directory fsync.
func BenchmarkCreateCheckpoint2KiB(b *testing.B) {
	s, err := NewFileStore(filepath.Join(b.TempDir(), "cp"))
	if err != nil {
		b.Fatal(err)
	}
	d := newBenchState(b, "5d0e2f4b-8b9a-4c1e-9d7a-1f2e3d4c5b6a", 2048)
	enc, _ := d.MarshalCheckpoint()
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.CreateCheckpoint("pod", d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListAndReadAll1000 measures what a restarted agent does before
// adopting its pods: list 1,000 checkpoints and read and verify each. Files
// are in the page cache, as they are after a process restart.
func BenchmarkListAndReadAll1000(b *testing.B) {
	s, err := NewFileStore(filepath.Join(b.TempDir(), "cp"))
	if err != nil {
		b.Fatal(err)
	}
	const n = 1000
	for i := range n {
		uid := fmt.Sprintf("pod-%04d", i)
		if err := s.CreateCheckpoint(uid, newBenchState(b, uid, 2048)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		keys, err := s.ListCheckpoints()
		if err != nil {
			b.Fatal(err)
		}
		if len(keys) != n {
			b.Fatalf("listed %d checkpoints, want %d", len(keys), n)
		}
		for _, key := range keys {
			if err := s.GetCheckpoint(key, &Data[benchState]{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/checkpoint")
}
