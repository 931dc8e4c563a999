package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/mount-utils"

	"github.com/nodelet/nodelet/internal/volume"
)

const (
	testDriver = "csi.example.com"
	testNode   = "node-a"
)

// fakeDriver is a CSI node service in memory. It mounts on the fake
// mounter as a real driver mounts, counts the calls that succeeded, and
// fails a method while fail names it.
type fakeDriver struct {
	csipb.NodeClient // methods nodelet does not call panic

	mu       sync.Mutex
	caps     []csipb.NodeServiceCapability_RPC_Type
	mounter  *mount.FakeMounter
	calls    map[string]int
	fail     map[string]error
	stages   []*csipb.NodeStageVolumeRequest
	publishs []*csipb.NodePublishVolumeRequest
	// keepMounted makes unpublish and unstage succeed without unmounting.
	keepMounted bool
}

func newFakeDriver(caps ...csipb.NodeServiceCapability_RPC_Type) *fakeDriver {
	return &fakeDriver{caps: caps, mounter: mount.NewFakeMounter(nil), calls: map[string]int{}, fail: map[string]error{}}
}

func (f *fakeDriver) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *fakeDriver) failing(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, method)
	} else {
		f.fail[method] = err
	}
}

func (f *fakeDriver) begin(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fail[method]
}

func (f *fakeDriver) done(method string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
}

func (f *fakeDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest, ...grpc.CallOption) (*csipb.NodeGetCapabilitiesResponse, error) {
	resp := &csipb.NodeGetCapabilitiesResponse{}
	for _, c := range f.caps {
		resp.Capabilities = append(resp.Capabilities, &csipb.NodeServiceCapability{
			Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: c}},
		})
	}
	return resp, nil
}

func (f *fakeDriver) NodeStageVolume(_ context.Context, req *csipb.NodeStageVolumeRequest, _ ...grpc.CallOption) (*csipb.NodeStageVolumeResponse, error) {
	if err := f.begin("stage"); err != nil {
		return nil, err
	}
	if _, err := os.Stat(req.StagingTargetPath); err != nil {
		return nil, fmt.Errorf("staging target path: %w", err)
	}
	if err := f.mountOnce(req.VolumeId, req.StagingTargetPath); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.stages = append(f.stages, req)
	f.mu.Unlock()
	f.done("stage")
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (f *fakeDriver) NodeUnstageVolume(_ context.Context, req *csipb.NodeUnstageVolumeRequest, _ ...grpc.CallOption) (*csipb.NodeUnstageVolumeResponse, error) {
	if err := f.begin("unstage"); err != nil {
		return nil, err
	}
	if err := f.unmount(req.StagingTargetPath); err != nil {
		return nil, err
	}
	f.done("unstage")
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (f *fakeDriver) NodePublishVolume(_ context.Context, req *csipb.NodePublishVolumeRequest, _ ...grpc.CallOption) (*csipb.NodePublishVolumeResponse, error) {
	if err := f.begin("publish"); err != nil {
		return nil, err
	}
	// The driver creates the target, a file for a block volume; its
	// parent must exist.
	if req.GetVolumeCapability().GetBlock() != nil {
		if _, err := os.Stat(filepath.Dir(req.TargetPath)); err != nil {
			return nil, fmt.Errorf("target path's parent: %w", err)
		}
		if err := os.WriteFile(req.TargetPath, nil, 0o600); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(req.TargetPath, 0o750); err != nil {
		return nil, err
	}
	if err := f.mountOnce(req.VolumeId, req.TargetPath); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.publishs = append(f.publishs, req)
	f.mu.Unlock()
	f.done("publish")
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (f *fakeDriver) NodeUnpublishVolume(_ context.Context, req *csipb.NodeUnpublishVolumeRequest, _ ...grpc.CallOption) (*csipb.NodeUnpublishVolumeResponse, error) {
	if err := f.begin("unpublish"); err != nil {
		return nil, err
	}
	if err := f.unmount(req.TargetPath); err != nil {
		return nil, err
	}
	f.done("unpublish")
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// mountOnce mounts path unless it is mounted: drivers are idempotent.
func (f *fakeDriver) mountOnce(source, path string) error {
	if mounted, _ := f.mounter.IsMountPoint(path); mounted {
		return nil
	}
	return f.mounter.Mount(source, path, "fake", nil)
}

// unmount unmounts path if it is mounted; a path that is gone or not
// mounted is success, as the CSI spec asks.
func (f *fakeDriver) unmount(path string) error {
	if f.keepMounted {
		return nil
	}
	if mounted, _ := f.mounter.IsMountPoint(path); !mounted {
		return nil
	}
	return f.mounter.Unmount(path)
}

// fakeDrivers serves registered fake drivers by name.
type fakeDrivers struct {
	mu      sync.Mutex
	drivers map[string]*fakeDriver
}

func (d *fakeDrivers) NodeClient(_ context.Context, name string) (csipb.NodeClient, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.drivers[name]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("CSI driver %s is not registered", name)
}

func (d *fakeDrivers) set(name string, f *fakeDriver) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f == nil {
		delete(d.drivers, name)
	} else {
		d.drivers[name] = f
	}
}

// env is a root directory with API objects, a driver and a publisher.
type env struct {
	t                 *testing.T
	root              string
	driver            *fakeDriver
	drivers           *fakeDrivers
	csiDrivers        map[string]*storagev1.CSIDriver
	attachments       map[string]*storagev1.VolumeAttachment
	secrets           map[string]*v1.Secret
	tokenCalls        []string
	ownership         []string
	attachGets        int
	attachTimeoutZero bool
	inUse             *InUse
}

func newEnv(t *testing.T, caps ...csipb.NodeServiceCapability_RPC_Type) *env {
	t.Helper()
	e := &env{
		t:           t,
		root:        t.TempDir(),
		driver:      newFakeDriver(caps...),
		csiDrivers:  map[string]*storagev1.CSIDriver{},
		attachments: map[string]*storagev1.VolumeAttachment{},
		secrets:     map[string]*v1.Secret{},
	}
	e.drivers = &fakeDrivers{drivers: map[string]*fakeDriver{testDriver: e.driver}}
	return e
}

// publisher is a fresh publisher over the env's root directory, as after a
// restart.
func (e *env) publisher() *Publisher {
	e.t.Helper()
	opts := Options{
		RootDir:  e.root,
		NodeName: testNode,
		Drivers:  e.drivers,
		CSIDriver: func(_ context.Context, name string) (*storagev1.CSIDriver, error) {
			if d, ok := e.csiDrivers[name]; ok {
				return d, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "storage.k8s.io", Resource: "csidrivers"}, name)
		},
		VolumeAttachment: func(_ context.Context, name string) (*storagev1.VolumeAttachment, error) {
			e.attachGets++
			if va, ok := e.attachments[name]; ok {
				return va, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}, name)
		},
		Secret: func(_ context.Context, ns, name string) (*v1.Secret, error) {
			if s, ok := e.secrets[ns+"/"+name]; ok {
				return s, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
		},
		ServiceAccountToken: func(_ context.Context, pod *v1.Pod, audience string, seconds int64) (authenticationv1.TokenRequestStatus, error) {
			e.tokenCalls = append(e.tokenCalls, fmt.Sprintf("%s/%s %d", pod.Name, audience, seconds))
			return authenticationv1.TokenRequestStatus{Token: "token-" + audience, ExpirationTimestamp: metav1.Unix(1800000000, 0)}, nil
		},
		Mounter: e.driver.mounter,
		SetOwnership: func(dir string, gid int64, _ *v1.PodFSGroupChangePolicy) error {
			e.ownership = append(e.ownership, fmt.Sprintf("%s %d", dir, gid))
			return nil
		},
	}
	opts.InUse = e.inUse
	if e.attachTimeoutZero {
		opts.AttachTimeout = 1 // one look, then the timeout
	}
	p, err := NewPublisher(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// attach marks the volume handle attached to the node with metadata.
func (e *env) attach(handle string, metadata map[string]string) {
	name := attachmentName(handle, testDriver, testNode)
	e.attachments[name] = &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: metadata},
	}
}

func testPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{ServiceAccountName: "sa"},
	}
}

func pvVolume(handle string) *volume.CSIVolume {
	return &volume.CSIVolume{
		Driver:       testDriver,
		VolumeHandle: handle,
		SpecName:     "pv-" + handle,
		VolumeName:   "data",
		PVName:       "pv-" + handle,
		FSType:       "ext4",
		Attributes:   map[string]string{"attr": "value"},
		MountOptions: []string{"noatime"},
		AccessModes:  []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

var errKilled = errors.New("killed")
