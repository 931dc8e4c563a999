package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's on-disk layout for CSI volumes, which drivers and node
// tools know:
//
//	<root>/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/globalmount  staging path
//	<root>/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>/vol_data.json
//	<root>/pods/<uid>/volumes/kubernetes.io~csi/<specName>/mount                  publish path
//	<root>/pods/<uid>/volumes/kubernetes.io~csi/<specName>/vol_data.json
const (
	pluginsDirName    = "plugins"
	csiPluginName     = "kubernetes.io/csi"
	podsDirName       = "pods"
	podVolumesDirName = "volumes"
	podPluginDirName  = "kubernetes.io~csi"
	globalMountName   = "globalmount"
	publishMountName  = "mount"
	volDataFileName   = "vol_data.json"

	// dirMode and fileMode are the modes of the directories and the state
	// files nodelet creates for CSI volumes.
	dirMode  = 0o750
	fileMode = 0o600
)

// sha256Hex is the hex SHA-256 of s.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// attachmentName is the name of the VolumeAttachment that attaches the
// volume handle of driver to node: "csi-" and the hex SHA-256 of the three
// concatenated, as the attach/detach controller names it.
func attachmentName(handle, driver, node string) string {
	return "csi-" + sha256Hex(handle+driver+node)
}

// driversDir holds every driver's stagings.
func driversDir(root string) string {
	return filepath.Join(root, pluginsDirName, csiPluginName)
}

// stagingDataDir is the directory of one staged volume: its vol_data.json
// and its globalmount.
func stagingDataDir(root, driver, handle string) string {
	return filepath.Join(driversDir(root), driver, sha256Hex(handle))
}

// stagingPath is the staging target path of a volume.
func stagingPath(root, driver, handle string) string {
	return filepath.Join(stagingDataDir(root, driver, handle), globalMountName)
}

// podCSIDir holds a pod's CSI volumes.
func podCSIDir(root string, uid types.UID) string {
	return filepath.Join(root, podsDirName, string(uid), podVolumesDirName, podPluginDirName)
}

// publishDataDir is the directory of one of a pod's CSI volumes: its
// vol_data.json and its mount.
func publishDataDir(root string, uid types.UID, specName string) string {
	return filepath.Join(podCSIDir(root, uid), specName)
}

// publishPath is the target path at which a pod's volume is published.
func publishPath(root string, uid types.UID, specName string) string {
	return filepath.Join(publishDataDir(root, uid, specName), publishMountName)
}

// checkPathElement refuses a name that would not be a single path element
// under the directory it is joined to. The API server validates driver,
// volume and pod names; this keeps a bad one from escaping the root.
func checkPathElement(kind, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("invalid %s %q", kind, name)
	}
	return nil
}
