package executor

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	content := "2026-11-22T05:00:00.000000000Z stdout F first line\n" +
		"2026-11-22T05:00:00.100000000Z stderr P partial \n" +
		"2026-11-22T05:00:00.200000000Z stderr F end\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := logTail(path), "first line\npartial end\n"; got != want {
		t.Fatalf("logTail = %q, want %q", got, want)
	}
	if got := logTail(filepath.Join(dir, "missing.log")); got != "" {
		t.Fatalf("logTail of a missing file = %q", got)
	}
}
