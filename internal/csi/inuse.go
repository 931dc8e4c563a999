package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// UniqueVolumeName is the name by which a CSI volume is listed in a Node's
// status (volumesInUse, volumesAttached): "kubernetes.io/csi/" and the
// driver and volume handle joined by "^", as the kubelet and the
// attach/detach controller spell it.
func UniqueVolumeName(driver, handle string) v1.UniqueVolumeName {
	return v1.UniqueVolumeName(csiPluginName + "/" + driver + "^" + handle)
}

// InUse tracks the node's volumes in use for the Node's status.volumesInUse,
// by which the attach/detach controller knows not to detach a volume that
// is still mounted. A volume is in use from the moment a pod's Publish
// starts waiting for its attachment until its last record on disk (a pod's
// publish record or its staging record) is gone, so a teardown cut short
// by a crash keeps it in use. Volumes of drivers known not to need
// attaching are left out, as the kubelet leaves them out.
//
// As in the kubelet, a volume that needs attaching is staged only once the
// Node's status lists it in use (MarkReported after a status write that
// carried it): the controller may not then detach it under the mount.
type InUse struct {
	root string
	// kick asks for a Node status write soon; optional.
	kick func()

	mu sync.Mutex
	// pending counts the Publish calls under way per volume.
	pending map[v1.UniqueVolumeName]int
	// noAttach are the drivers seen not to need attaching.
	noAttach map[string]bool
	// reported is what the last status write listed.
	reported map[v1.UniqueVolumeName]bool
	// changed is closed and replaced at every MarkReported.
	changed chan struct{}
	// recordPods are the pods whose publish records List reads between
	// its scans of every pod: those the last scan found with records and
	// those noted since (notePod), each with the scan epoch it was found
	// or noted in.
	recordPods map[types.UID]uint64
	// epoch counts the scans begun; untilScan the Lists until the next.
	epoch     uint64
	untilScan int
}

// listsPerScan is how often List reads every pod's directory for publish
// records: at its first call, then every listsPerScan-th (five minutes at
// the Node's status updates of ten seconds), a safety net for records
// that no Publish of this process noted.
const listsPerScan = 30

// NewInUse returns the tracker of the volumes under rootDir. kick, when
// set, is called when a volume becomes in use, to have the Node's status
// written without waiting for its next update. The Publisher that writes
// under rootDir must be given it (Options.InUse): between its
// scans of every pod, List reads the records of the pods it found then
// and of those the Publisher wrote records for since.
func NewInUse(rootDir string, kick func()) *InUse {
	return &InUse{
		root:       rootDir,
		kick:       kick,
		pending:    map[v1.UniqueVolumeName]int{},
		noAttach:   map[string]bool{},
		reported:   map[v1.UniqueVolumeName]bool{},
		changed:    make(chan struct{}),
		recordPods: map[types.UID]uint64{},
	}
}

// notePod records that the pod has a publish record on disk, written
// before the call: from now on every List reads it.
func (u *InUse) notePod(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.recordPods[uid] = u.epoch
}

// recordPaths returns the paths of the pods' publish records: of every
// pod when a scan is due, else of the pods in recordPods.
func (u *InUse) recordPaths() ([]string, error) {
	u.mu.Lock()
	scan := u.untilScan <= 0
	if !scan {
		u.untilScan--
		uids := make([]types.UID, 0, len(u.recordPods))
		for uid := range u.recordPods {
			uids = append(uids, uid)
		}
		u.mu.Unlock()
		return podRecordsOf(u.root, uids), nil
	}
	u.epoch++
	epoch := u.epoch
	u.mu.Unlock()
	paths, pods, err := scanPodRecords(u.root)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err != nil {
		return nil, err
	}
	u.untilScan = listsPerScan - 1
	keepScanned(u.recordPods, pods, epoch)
	return paths, nil
}

// keepScanned updates recordPods with what the scan of the given epoch
// found: the pods it found, and those noted after it began (their records
// may have come after the scan read their directories); the others have
// no record left.
func keepScanned(recordPods map[types.UID]uint64, found []types.UID, epoch uint64) {
	for uid, e := range recordPods {
		if e < epoch {
			delete(recordPods, uid)
		}
	}
	for _, uid := range found {
		recordPods[uid] = max(recordPods[uid], epoch)
	}
}

// acquire counts a Publish of the volume under way until release.
func (u *InUse) acquire(driver, handle string) (release func()) {
	name := UniqueVolumeName(driver, handle)
	u.mu.Lock()
	u.pending[name]++
	u.mu.Unlock()
	if u.kick != nil {
		u.kick()
	}
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.pending[name]--
		if u.pending[name] <= 0 {
			delete(u.pending, name)
		}
	}
}

// released asks for a Node status write: volumes may have left use.
func (u *InUse) released() {
	if u.kick != nil {
		u.kick()
	}
}

// noAttachDriver records that driver's volumes need no attaching.
func (u *InUse) noAttachDriver(driver string, none bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if none {
		u.noAttach[driver] = true
	} else {
		delete(u.noAttach, driver)
	}
}

// DriverChanged takes the driver's CSIDriver object as it is now (nil when
// there is none): when it stops or starts needing attachment, the volumes
// on disk leave or join the list and a Node status write is asked for, so
// that the attach/detach controller detaches what no longer needs it.
func (u *InUse) DriverChanged(driver string, d *storagev1.CSIDriver) {
	none := !attachRequired(d)
	u.mu.Lock()
	changed := u.noAttach[driver] != none
	u.mu.Unlock()
	if !changed {
		return
	}
	u.noAttachDriver(driver, none)
	if u.kick != nil {
		u.kick()
	}
}

// List returns the volumes in use, sorted: those being published and those
// with a record on disk, but for drivers known not to need attaching.
func (u *InUse) List() ([]v1.UniqueVolumeName, error) {
	paths, err := u.recordPaths()
	var records []volData
	if err == nil {
		records, err = readRecords(u.root, paths)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	set := map[v1.UniqueVolumeName]bool{}
	for name := range u.pending {
		set[name] = true
	}
	for _, r := range records {
		if !u.noAttach[r.DriverName] {
			set[UniqueVolumeName(r.DriverName, r.VolumeHandle)] = true
		}
	}
	out := make([]v1.UniqueVolumeName, 0, len(set))
	for name := range set {
		out = append(out, name)
	}
	slices.Sort(out)
	return out, err
}

// MarkReported records the volumes that a successful write of the Node's
// status listed in volumesInUse.
func (u *InUse) MarkReported(names []v1.UniqueVolumeName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reported = make(map[v1.UniqueVolumeName]bool, len(names))
	for _, n := range names {
		u.reported[n] = true
	}
	close(u.changed)
	u.changed = make(chan struct{})
}

// waitReported blocks until the Node's status lists the volume in use.
func (u *InUse) waitReported(ctx context.Context, driver, handle string) error {
	name := UniqueVolumeName(driver, handle)
	for {
		u.mu.Lock()
		ok, changed := u.reported[name], u.changed
		u.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("volume %s is not yet reported in use in the node's status: %w", name, ctx.Err())
		case <-changed:
		}
	}
}

// podRecords returns the paths of the pods' publish records under root:
// one directory read for the pods, and one open for each pod, which fails
// for a pod without CSI volumes. A glob of the same paths read every pod's
// directory and its volumes directory, for each Node status update.
func podRecords(root string) ([]string, error) {
	paths, _, err := scanPodRecords(root)
	return paths, err
}

// scanPodRecords is podRecords that also returns the pods with records.
func scanPodRecords(root string) (paths []string, pods []types.UID, err error) {
	podsDir := filepath.Join(root, podsDirName)
	entries, err := os.ReadDir(podsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("listing CSI volume records: %w", err)
	}
	for _, pod := range entries {
		uid := types.UID(pod.Name())
		if p := appendPodRecords(paths, root, uid); len(p) > len(paths) {
			paths, pods = p, append(pods, uid)
		}
	}
	return paths, pods, nil
}

// podRecordsOf returns the paths of the publish records of the pods uids.
func podRecordsOf(root string, uids []types.UID) []string {
	var paths []string
	for _, uid := range uids {
		paths = appendPodRecords(paths, root, uid)
	}
	return paths
}

// appendPodRecords appends the paths of the pod's publish records to
// paths: none when it has no CSI volume or is being removed.
func appendPodRecords(paths []string, root string, uid types.UID) []string {
	dir := podCSIDir(root, uid)
	vols, err := os.ReadDir(dir)
	if err != nil {
		return paths
	}
	for _, v := range vols {
		if v.IsDir() {
			paths = append(paths, filepath.Join(dir, v.Name(), volDataFileName))
		}
	}
	return paths
}

// readRecords reads the pods' publish records at podPaths and every
// staging's record under root. Unreadable ones are skipped and reported
// in the error, after the others.
func readRecords(root string, podPaths []string) ([]volData, error) {
	paths := podPaths
	for _, pattern := range []string{
		filepath.Join(driversDir(root), "*", "*", volDataFileName),
		filepath.Join(blockDevicesDir(root), "*", blockDataDirName, volDataFileName),
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("listing CSI volume records: %w", err)
		}
		paths = append(paths, m...)
	}
	var out []volData
	var firstErr error
	for _, p := range paths {
		d, err := readVolData(filepath.Dir(p))
		switch {
		case os.IsNotExist(err):
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
		default:
			out = append(out, d)
		}
	}
	return out, firstErr
}
