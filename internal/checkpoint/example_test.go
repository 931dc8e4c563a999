package checkpoint_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodelet/nodelet/internal/checkpoint"
)

// PodState is what a reconciler keeps across restarts.
type PodState struct {
	SandboxAttempt int            `json:"sandboxAttempt"`
	Restarts       map[string]int `json:"restarts,omitempty"`
}

func Example() {
	dir, _ := os.MkdirTemp("", "checkpoints")
	defer os.RemoveAll(dir)
	store, err := checkpoint.NewFileStore(filepath.Join(dir, "pods"))
	if err != nil {
		panic(err)
	}

	// Save after each change the runtime cannot report.
	if err := store.CreateCheckpoint("pod-5d0e2f4b", checkpoint.NewData(PodState{SandboxAttempt: 1})); err != nil {
		panic(err)
	}

	// At start, read everything back; rebuild from the runtime what is gone.
	keys, _ := store.ListCheckpoints()
	for _, key := range keys {
		state := &checkpoint.Data[PodState]{}
		switch err := store.GetCheckpoint(key, state); {
		case errors.Is(err, checkpoint.ErrCorruptCheckpoint), errors.Is(err, checkpoint.ErrUnsupportedVersion):
			fmt.Println("rebuild", key, "from the runtime")
		case err != nil:
			panic(err)
		default:
			fmt.Println(key, "sandbox attempt", state.Value.SandboxAttempt)
		}
	}
	// Output: pod-5d0e2f4b sandbox attempt 1
}
