package csi

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkInUseListAtRest250 measures the Node status update's list of
// the volumes in use on a node at rest with 250 pods, none of them with a
// CSI volume: what every update pays for the CSI records.
func BenchmarkInUseListAtRest250(b *testing.B) {
	root := b.TempDir()
	for i := range 250 {
		if err := os.MkdirAll(filepath.Join(root, podsDirName, fmt.Sprintf("5d0e2f4b-8b9a-4c1e-9d7a-%012d", i), podVolumesDirName), 0o750); err != nil {
			b.Fatal(err)
		}
	}
	u := NewInUse(root, nil)
	b.ReportAllocs()
	for b.Loop() {
		if l, err := u.List(); err != nil || len(l) != 0 {
			b.Fatalf("in use: %v, %v", l, err)
		}
	}
}
