package controller

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// readPodState reads uid's state through store.
func readPodState(t *testing.T, store checkpoint.Manager, uid string) (state.PodState, error) {
	t.Helper()
	d := checkpoint.NewData(state.NewPodState(""))
	err := store.GetCheckpoint(checkpointKey(types.UID(uid)), d)
	return d.Value, err
}

func encoded(t *testing.T, st state.PodState) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPodStatesKeepWhatTheFileHolds(t *testing.T) {
	dir := t.TempDir()
	files, err := checkpoint.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	states := newPodStates(files)
	st := state.NewPodState("a")
	st.RecordSandbox("sb1", 0)
	st.RecordStart("app", 0, time.Time{}, 0, time.Unix(100, 0))
	if err := states.CreateCheckpoint(checkpointKey("a"), checkpoint.NewData(st)); err != nil {
		t.Fatal(err)
	}
	got, err := readPodState(t, states, "a")
	if err != nil || got.SandboxID != "sb1" || got.Containers["app"].RestartCount != 0 || !got.Containers["app"].Created {
		t.Fatalf("read %+v, %v", got, err)
	}
	// What a reader changes is its own.
	got.SandboxID = "changed"
	got.Containers["app"] = state.ContainerRecord{RestartCount: 7}
	again, err := readPodState(t, states, "a")
	if err != nil || again.SandboxID != "sb1" || again.Containers["app"].RestartCount != 0 {
		t.Fatalf("a reader's change showed in the next read: %+v, %v", again, err)
	}

	// The memory is the file's content: a restarted agent (a new cache
	// over the same directory) reads the same state from the file.
	// (Compared as encoded: a time read from a file is in UTC.)
	restarted, err := readPodState(t, newPodStates(files), "a")
	if err != nil {
		t.Fatal(err)
	}
	if file, mem := encoded(t, restarted), encoded(t, again); file != mem {
		t.Fatalf("the file holds %s, the memory %s", file, mem)
	}

	// A second write replaces both.
	st.RecordSandbox("sb2", 1)
	if err := states.CreateCheckpoint(checkpointKey("a"), checkpoint.NewData(st)); err != nil {
		t.Fatal(err)
	}
	for name, store := range map[string]checkpoint.Manager{"memory": states, "file": newPodStates(files)} {
		if got, err := readPodState(t, store, "a"); err != nil || got.SandboxID != "sb2" {
			t.Errorf("%s: after a second write, read %q, %v", name, got.SandboxID, err)
		}
	}

	// Removed: gone from both.
	if err := states.RemoveCheckpoint(checkpointKey("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := readPodState(t, states, "a"); !errors.Is(err, checkpoint.ErrCheckpointNotFound) {
		t.Errorf("after removal, read %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, checkpointKey("a"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file is left: %v", err)
	}
}

func TestPodStatesReadTheFileOnce(t *testing.T) {
	dir := t.TempDir()
	files, err := checkpoint.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := state.NewPodState("b")
	st.RecordSandbox("sb", 0)
	if err := files.CreateCheckpoint(checkpointKey("b"), checkpoint.NewData(st)); err != nil {
		t.Fatal(err)
	}
	states := newPodStates(files)
	if got, err := readPodState(t, states, "b"); err != nil || got.SandboxID != "sb" {
		t.Fatalf("first read: %+v, %v", got, err)
	}
	// The file is read and verified once: the reads after it come from
	// memory (what is left on disk is no longer looked at).
	if err := os.WriteFile(filepath.Join(dir, checkpointKey("b")), []byte(`{"version":1,"data":{"uid":"torn`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readPodState(t, states, "b"); err != nil || got.SandboxID != "sb" {
		t.Errorf("second read: %+v, %v", got, err)
	}
	// Without a copy in memory the corrupt file is reported and set aside.
	if _, err := readPodState(t, newPodStates(files), "b"); !errors.Is(err, checkpoint.ErrCorruptCheckpoint) {
		t.Errorf("a corrupt file read %v", err)
	}
	// A missing checkpoint stays missing.
	if _, err := readPodState(t, states, "none"); !errors.Is(err, checkpoint.ErrCheckpointNotFound) {
		t.Errorf("a missing checkpoint read %v", err)
	}
}

// otherValue is a checkpoint value that is not a pod's state.
type otherValue struct {
	N int `json:"n"`
}

func TestPodStatesPassOtherCheckpointsThrough(t *testing.T) {
	dir := t.TempDir()
	files, err := checkpoint.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	states := newPodStates(files)
	if err := states.CreateCheckpoint("other", checkpoint.NewData(otherValue{N: 1})); err != nil {
		t.Fatal(err)
	}
	if err := files.CreateCheckpoint("other", checkpoint.NewData(otherValue{N: 2})); err != nil {
		t.Fatal(err)
	}
	d := checkpoint.NewData(otherValue{})
	if err := states.GetCheckpoint("other", d); err != nil || d.Value.N != 2 {
		t.Errorf("read %+v, %v; want the file's 2", d.Value, err)
	}
}
