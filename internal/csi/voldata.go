package csi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// volData is a vol_data.json, with the keys the kubelet writes, so that a
// node moved between the kubelet and nodelet tears down what the other set
// up. A publish directory's file has all of them; a staging directory's
// only driverName and volumeHandle.
type volData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
}

// writeVolData writes d as dir/vol_data.json, replacing the old one
// atomically and durably: a crash leaves the old file or the new one, never
// a partial one.
func writeVolData(dir string, d volData) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", volDataFileName, err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, volDataFileName), b, fileMode)
}

// readVolData reads dir/vol_data.json. The error satisfies os.IsNotExist
// when there is none.
func readVolData(dir string) (volData, error) {
	var d volData
	b, err := os.ReadFile(filepath.Join(dir, volDataFileName))
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("decoding %s: %w", filepath.Join(dir, volDataFileName), err)
	}
	if d.DriverName == "" || d.VolumeHandle == "" {
		return d, fmt.Errorf("%s names no driver or volume handle", filepath.Join(dir, volDataFileName))
	}
	return d, nil
}
