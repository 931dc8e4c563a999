package csi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// writeVolData writes d as dir/vol_data.json: a temporary file, synced and
// renamed over the old one, so that a crash leaves the old file or the new
// one, never a partial one.
func writeVolData(dir string, d volData) (err error) {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", volDataFileName, err)
	}
	// CreateTemp makes the file with mode 0600 (fileMode).
	f, err := os.CreateTemp(dir, "."+volDataFileName+".*")
	if err != nil {
		return fmt.Errorf("writing %s in %s: %w", volDataFileName, dir, err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, volDataFileName))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s in %s: %w", volDataFileName, dir, err)
	}
	return syncDir(dir)
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

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
