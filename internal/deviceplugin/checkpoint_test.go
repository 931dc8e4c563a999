package deviceplugin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodelet/nodelet/internal/checkpoint"
)

func TestStateRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), DirName)
	store, err := checkpoint.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := LoadState(store)
	if err != nil || len(empty.Assignments) != 0 {
		t.Fatalf("empty directory: %v, %v", empty, err)
	}
	want := State{
		Assignments: []Assignment{
			{PodUID: "b", ContainerName: "c", ResourceName: "example.com/gpu", DeviceIDs: []string{"dev-1"}, AllocResp: []byte{1, 2}},
			{PodUID: "a", ContainerName: "c", ResourceName: "example.com/gpu", DeviceIDs: []string{"dev-0"}},
		},
		Registered: map[string][]string{"example.com/gpu": {"dev-0", "dev-1"}},
	}
	if err := SaveState(store, want); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, CheckpointKey))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint mode %v, want 0600", info.Mode().Perm())
	}
	if d, _ := os.Stat(dir); d.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", d.Mode().Perm())
	}
	got, err := LoadState(store)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.sorted(), got); diff != "" {
		t.Fatalf("state (-want +got):\n%s", diff)
	}
}

func TestCorruptStateIsSetAside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), DirName)
	store, err := checkpoint.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := SaveState(store, State{Assignments: []Assignment{{PodUID: "a", ContainerName: "c", ResourceName: "example.com/gpu", DeviceIDs: []string{"x"}}}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CheckpointKey)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x20
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := LoadState(store)
	if !errors.Is(err, checkpoint.ErrCorruptCheckpoint) {
		t.Fatalf("error %v, want a corrupt checkpoint", err)
	}
	if len(st.Assignments) != 0 {
		t.Errorf("state %v from a corrupt file", st)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("corrupt file still in place: %v", err)
	}
	// A manager opening the directory starts empty instead of failing.
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatalf("a corrupt checkpoint must not stop the manager: %v", err)
	}
	if capacity, _, _ := m.Resources(); len(capacity) != 0 {
		t.Errorf("capacity %v from a corrupt checkpoint", capacity)
	}
}
