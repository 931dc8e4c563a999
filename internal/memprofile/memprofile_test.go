package memprofile

import (
	"runtime"
	"testing"
)

func TestImportingTurnsProfilingOffAndEnableBackOn(t *testing.T) {
	if runtime.MemProfileRate != 0 {
		t.Fatalf("MemProfileRate = %d after init, want 0", runtime.MemProfileRate)
	}
	t.Cleanup(func() { runtime.MemProfileRate = 0 })
	Enable()
	if runtime.MemProfileRate != DefaultRate {
		t.Fatalf("MemProfileRate = %d after Enable, want %d", runtime.MemProfileRate, DefaultRate)
	}
}
