package dra

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/checkpoint"
)

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), CheckpointName)
	empty, err := LoadState(path, time.Now())
	if err != nil || len(empty.Claims) != 0 {
		t.Fatalf("no file: %v, %v", empty, err)
	}
	want := State{Claims: []ClaimState{
		{UID: "b", Name: "gpu", Namespace: "ns", PodUIDs: []types.UID{"p2"}, Drivers: []DriverState{{Name: "gpu.example.com", SkipUnprepare: true}}},
		{UID: "a", Name: "net", Namespace: "ns", PodUIDs: []types.UID{"p1", "p2"}, Prepared: true, Drivers: []DriverState{{Name: "net.example.com", Devices: []Device{
			{RequestNames: []string{"r"}, Pool: "node", Device: "eth1", ShareID: "s", CDIDeviceIDs: []string{"net.example.com/nic=eth1"}},
		}}}},
	}}
	if err := SaveState(path, want); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint mode %v, want 0600", info.Mode().Perm())
	}
	got, err := LoadState(path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.sorted(), got); diff != "" {
		t.Fatalf("state (-want +got):\n%s", diff)
	}
}

func TestCorruptStateIsSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), CheckpointName)
	if err := SaveState(path, State{Claims: []ClaimState{{UID: "a", Name: "c", Namespace: "ns"}}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x20
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 42)
	st, err := LoadState(path, now)
	if !errors.Is(err, checkpoint.ErrCorruptCheckpoint) {
		t.Fatalf("error %v, want a corrupt checkpoint", err)
	}
	if len(st.Claims) != 0 {
		t.Errorf("a corrupt file gave %v", st)
	}
	if _, err := os.Stat(path + ".corrupt-42"); err != nil {
		t.Errorf("the corrupt file is not set aside: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the corrupt file stays: %v", err)
	}
}

func writeGarbage(path string) error { return os.WriteFile(path, []byte("{not json"), 0o600) }
