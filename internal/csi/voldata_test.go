package csi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVolDataKeysAndMode(t *testing.T) {
	dir := t.TempDir()
	in := volData{
		SpecVolID:           "pv-1",
		VolumeHandle:        "vol-1",
		DriverName:          testDriver,
		NodeName:            testNode,
		AttachmentID:        "csi-abc",
		VolumeLifecycleMode: "Persistent",
	}
	if err := writeVolData(dir, in); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, volDataFileName))
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's keys, so that either agent reads the other's files.
	var keys map[string]string
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"specVolID": "pv-1", "volumeHandle": "vol-1", "driverName": testDriver,
		"nodeName": testNode, "attachmentID": "csi-abc", "volumeLifecycleMode": "Persistent",
	}
	if d := cmp.Diff(want, keys); d != "" {
		t.Errorf("keys (-want +got):\n%s", d)
	}
	st, err := os.Stat(filepath.Join(dir, volDataFileName))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != fileMode {
		t.Errorf("mode %v, want %v", st.Mode().Perm(), os.FileMode(fileMode))
	}
	out, err := readVolData(dir)
	if err != nil || out != in {
		t.Errorf("read back %+v, %v", out, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestReadVolDataRefusesIncomplete(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, volDataFileName), []byte(`{"driverName":"d"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readVolData(dir); err == nil {
		t.Error("a record without a volume handle was accepted")
	}
	if _, err := readVolData(t.TempDir()); !os.IsNotExist(err) {
		t.Errorf("missing record: %v, want not-exist", err)
	}
}
