package deviceplugin

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/checkpoint"
)

// CheckpointKey is the file, in the device plugins directory, that keeps
// the assignments and registered resources across restarts.
const CheckpointKey = "nodelet_internal_checkpoint"

// Assignment is what one container of a pod holds of one resource: the
// devices and the plugin's Allocate response for them (protobuf).
type Assignment struct {
	PodUID        types.UID `json:"podUID"`
	ContainerName string    `json:"containerName"`
	ResourceName  string    `json:"resourceName"`
	DeviceIDs     []string  `json:"deviceIDs"`
	AllocResp     []byte    `json:"allocResp,omitempty"`
}

// State is the checkpointed state: the assignments, and the devices of each
// registered resource (so that a restart reports them, unhealthy, until the
// plugin registers again).
type State struct {
	Assignments []Assignment        `json:"assignments,omitempty"`
	Registered  map[string][]string `json:"registered,omitempty"`
}

// sorted returns s with assignments in a stable order, so equal states
// write equal files.
func (s State) sorted() State {
	out := State{Assignments: slices.Clone(s.Assignments), Registered: s.Registered}
	slices.SortFunc(out.Assignments, func(a, b Assignment) int {
		switch {
		case a.PodUID != b.PodUID:
			return cmpString(string(a.PodUID), string(b.PodUID))
		case a.ContainerName != b.ContainerName:
			return cmpString(a.ContainerName, b.ContainerName)
		default:
			return cmpString(a.ResourceName, b.ResourceName)
		}
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SaveState writes s to store.
func SaveState(store checkpoint.Manager, s State) error {
	if err := store.CreateCheckpoint(CheckpointKey, checkpoint.NewData(s.sorted())); err != nil {
		return fmt.Errorf("writing device assignments: %w", err)
	}
	return nil
}

// LoadState reads the state from store: none when there is no file yet. A
// corrupt file is set aside by the store and reported as an error matching
// checkpoint.ErrCorruptCheckpoint, with an empty state.
func LoadState(store checkpoint.Manager) (State, error) {
	d := checkpoint.NewData(State{})
	err := store.GetCheckpoint(CheckpointKey, d)
	switch {
	case errors.Is(err, checkpoint.ErrCheckpointNotFound):
		return State{}, nil
	case err != nil:
		return State{}, fmt.Errorf("reading device assignments: %w", err)
	}
	return d.Value, nil
}
