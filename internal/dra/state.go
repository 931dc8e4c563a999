package dra

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/checkpoint"
)

// CheckpointName is the file, in the root directory, that keeps the
// prepared claims across restarts (the kubelet's name).
const CheckpointName = "dra_manager_state"

// checkpointMode is the checkpoint file's mode: it names the node's pods
// and devices.
const checkpointMode fs.FileMode = 0o600

// State is the checkpointed state: every claim the node prepared, or is
// preparing, with the pods that use it.
type State struct {
	Claims []ClaimState `json:"claims,omitempty"`
}

// ClaimState is one ResourceClaim on the node.
type ClaimState struct {
	UID       types.UID `json:"uid"`
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	// PodUIDs are the pods that use the claim, sorted. A pod is added
	// before its drivers are called, so that a crash during the calls
	// leaves a record to unprepare.
	PodUIDs []types.UID `json:"podUIDs"`
	// Prepared says every driver answered NodePrepareResources.
	Prepared bool `json:"prepared"`
	// Drivers are the drivers of the claim's allocation, by name.
	Drivers []DriverState `json:"drivers"`
}

// DriverState is what one driver holds of a claim.
type DriverState struct {
	Name string `json:"name"`
	// SkipPrepare and SkipUnprepare: every device of the driver in the
	// allocation asks the node not to make that call.
	SkipPrepare   bool `json:"skipPrepare,omitempty"`
	SkipUnprepare bool `json:"skipUnprepare,omitempty"`
	// Devices are what the driver's NodePrepareResources answered.
	Devices []Device `json:"devices,omitempty"`
}

// Device is one prepared device.
type Device struct {
	// RequestNames are the claim's requests the device is for; none means
	// every request.
	RequestNames []string `json:"requestNames,omitempty"`
	Pool         string   `json:"pool"`
	Device       string   `json:"device"`
	ShareID      string   `json:"shareID,omitempty"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs,omitempty"`
}

// sorted returns s in a stable order, so equal states write equal files.
func (s State) sorted() State {
	out := State{Claims: slices.Clone(s.Claims)}
	slices.SortFunc(out.Claims, func(a, b ClaimState) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return out
}

// SaveState writes s to path, atomically and durably, 0600.
func SaveState(path string, s State) error {
	b, err := checkpoint.NewData(s.sorted()).MarshalCheckpoint()
	if err != nil {
		return fmt.Errorf("writing ResourceClaim state: %w", err)
	}
	if err := atomicfile.WriteFile(path, b, checkpointMode); err != nil {
		return fmt.Errorf("writing ResourceClaim state: %w", err)
	}
	return nil
}

// LoadState reads the state at path: none when there is no file yet. A
// file that does not decode or verify is moved aside (to
// <path>.corrupt-<unix nanoseconds>) and reported as a
// *checkpoint.CorruptCheckpointError, with an empty state.
func LoadState(path string, now time.Time) (State, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return State{}, nil
	case err != nil:
		return State{}, fmt.Errorf("reading ResourceClaim state: %w", err)
	}
	d := checkpoint.NewData(State{})
	err = d.UnmarshalCheckpoint(b)
	if err == nil {
		err = d.VerifyChecksum()
	}
	if err != nil {
		return State{}, quarantine(path, now, err)
	}
	return d.Value, nil
}

// quarantine moves the corrupt file at path aside.
func quarantine(path string, now time.Time, cause error) error {
	cerr := &checkpoint.CorruptCheckpointError{Key: CheckpointName, Path: path, Err: cause}
	dest := path + ".corrupt-" + strconv.FormatInt(now.UnixNano(), 10)
	if err := os.Rename(path, dest); err != nil {
		cerr.Err = errors.Join(cause, fmt.Errorf("moving corrupt ResourceClaim state aside: %w", err))
		return cerr
	}
	cerr.QuarantinePath = dest
	return cerr
}
