package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/mount-utils"
)

// boundPair returns a claim ns/name bound to a PV pvName with source src.
func boundPair(name, pvName string, src v1.PersistentVolumeSource) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	claim := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("claim-uid-" + name)},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: pvName},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeSource: src,
			ClaimRef:               &v1.ObjectReference{Namespace: "ns", Name: name, UID: claim.UID},
		},
	}
	return claim, pv
}

func claimVolume(name, claim string, readOnly bool) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}
}

func ephemeralVolume(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
		VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{},
	}}}
}

func hostPathPV(path string) v1.PersistentVolumeSource {
	return v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}}
}

func TestSetUpClaimResolution(t *testing.T) {
	const prefix = "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: "
	deleted := metav1.Now()
	tests := []struct {
		name   string
		volume v1.Volume
		// edit changes the bound pair before it is served; nil objects are
		// not served.
		edit    func(pod *v1.Pod, c **v1.PersistentVolumeClaim, pv **v1.PersistentVolume)
		wantErr string
	}{{
		name:   "bound claim",
		volume: claimVolume("data", "claim", false),
	}, {
		name:    "claim missing",
		volume:  claimVolume("data", "claim", false),
		edit:    func(_ *v1.Pod, c **v1.PersistentVolumeClaim, _ **v1.PersistentVolume) { *c = nil },
		wantErr: prefix + `error processing PVC ns/claim: failed to fetch PVC from API server: persistentvolumeclaims "claim" not found`,
	}, {
		name:   "claim being deleted",
		volume: claimVolume("data", "claim", false),
		edit: func(_ *v1.Pod, c **v1.PersistentVolumeClaim, _ **v1.PersistentVolume) {
			(*c).DeletionTimestamp = &deleted
		},
		wantErr: prefix + "error processing PVC ns/claim: PVC is being deleted",
	}, {
		name:   "claim not bound",
		volume: claimVolume("data", "claim", false),
		edit: func(_ *v1.Pod, c **v1.PersistentVolumeClaim, _ **v1.PersistentVolume) {
			(*c).Status.Phase = v1.ClaimPending
			(*c).Spec.VolumeName = ""
		},
		wantErr: prefix + "error processing PVC ns/claim: PVC is not bound",
	}, {
		name:    "PV missing",
		volume:  claimVolume("data", "claim", false),
		edit:    func(_ *v1.Pod, _ **v1.PersistentVolumeClaim, pv **v1.PersistentVolume) { *pv = nil },
		wantErr: prefix + `error processing PVC ns/claim: failed to fetch PV pv-1 from API server: persistentvolumes "pv-1" not found`,
	}, {
		name:   "PV being deleted",
		volume: claimVolume("data", "claim", false),
		edit: func(_ *v1.Pod, _ **v1.PersistentVolumeClaim, pv **v1.PersistentVolume) {
			(*pv).DeletionTimestamp = &deleted
		},
		wantErr: prefix + "error processing PVC ns/claim: can't start pod because PV pv-1 is being deleted",
	}, {
		name:   "PV bound to another claim of the same name",
		volume: claimVolume("data", "claim", false),
		edit: func(_ *v1.Pod, _ **v1.PersistentVolumeClaim, pv **v1.PersistentVolume) {
			(*pv).Spec.ClaimRef.UID = "old-claim"
		},
		wantErr: prefix + "error processing PVC ns/claim: found PV object pv-1 but its pv.Spec.ClaimRef.UID old-claim does not point to claim.UID claim-uid-claim",
	}, {
		name:   "PV not bound",
		volume: claimVolume("data", "claim", false),
		edit: func(_ *v1.Pod, _ **v1.PersistentVolumeClaim, pv **v1.PersistentVolume) {
			(*pv).Spec.ClaimRef = nil
		},
		wantErr: prefix + "error processing PVC ns/claim: found PV object pv-1 but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim",
	}, {
		name:   "ephemeral claim owned by the pod",
		volume: ephemeralVolume("data"),
		edit: func(pod *v1.Pod, c **v1.PersistentVolumeClaim, _ **v1.PersistentVolume) {
			(*c).OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptrTo(true)}}
		},
	}, {
		name:   "ephemeral claim not owned by the pod",
		volume: ephemeralVolume("data"),
		edit: func(_ *v1.Pod, c **v1.PersistentVolumeClaim, _ **v1.PersistentVolume) {
			(*c).OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "another", Controller: ptrTo(true)}}
		},
		wantErr: prefix + "PVC ns/web-data was not created for pod ns/web (pod is not owner)",
	}, {
		name:   "PV of a source nodelet does not support",
		volume: claimVolume("data", "claim", false),
		edit: func(_ *v1.Pod, _ **v1.PersistentVolumeClaim, pv **v1.PersistentVolume) {
			(*pv).Spec.PersistentVolumeSource = v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/x"}}
		},
		wantErr: `MountVolume.SetUp failed for volume "data" : PersistentVolume pv-1 has source nfs, which nodelet does not support`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t)
			host := t.TempDir()
			pod := testPod(tt.volume)
			claimName := "claim"
			if tt.volume.Ephemeral != nil {
				claimName = "web-data"
			}
			claim, pv := boundPair(claimName, "pv-1", hostPathPV(host))
			if tt.edit != nil {
				tt.edit(pod, &claim, &pv)
			}
			if claim != nil {
				e.f.setClaim(claim)
			}
			if pv != nil {
				e.f.setPV(pv)
			}
			err := e.m.SetUp(context.Background(), pod)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("SetUp: %v", err)
				}
				got := e.m.PodVolumePaths(pod)["data"]
				want := PodVolume{Path: host, Kind: KindHostPath, PVName: "pv-1", ClaimNamespace: "ns", ClaimName: claimName}
				if got != want {
					t.Errorf("PodVolumePaths[data] = %+v, want %+v", got, want)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("SetUp error = %v\nwant %s", err, tt.wantErr)
			}
			if e.m.IsSetUp(pod.UID) {
				t.Error("the pod is set up")
			}
		})
	}
}

// TestSetUpClaimBoundLater: a claim that binds after a failed SetUp is
// read again at the next one.
func TestSetUpClaimBoundLater(t *testing.T) {
	e := newTestEnv(t)
	pod := testPod(claimVolume("data", "claim", false))
	claim, pv := boundPair("claim", "pv-1", hostPathPV(t.TempDir()))
	pending := claim.DeepCopy()
	pending.Status.Phase, pending.Spec.VolumeName = v1.ClaimPending, ""
	e.f.setClaim(pending)
	if err := e.m.SetUp(context.Background(), pod); err == nil || !strings.Contains(err.Error(), "PVC is not bound") {
		t.Fatalf("SetUp error = %v, want the claim not bound", err)
	}
	e.f.setClaim(claim)
	e.f.setPV(pv)
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp after the claim bound: %v", err)
	}
}

func TestCheckVolumeMode(t *testing.T) {
	block, fsMode := v1.PersistentVolumeBlock, v1.PersistentVolumeFilesystem
	tests := []struct {
		name    string
		mode    *v1.PersistentVolumeMode
		mounts  bool
		devices bool
		wantErr string
	}{
		{name: "unset mode mounted", mode: nil, mounts: true},
		{name: "filesystem mounted", mode: &fsMode, mounts: true},
		{name: "filesystem unused", mode: &fsMode},
		{name: "block in volumeMounts", mode: &block, mounts: true, wantErr: "volume data has volumeMode Block, but is specified in volumeMounts"},
		{name: "filesystem in volumeDevices", mode: &fsMode, devices: true, wantErr: "volume data has volumeMode Filesystem, but is specified in volumeDevices"},
		{name: "unset mode in volumeDevices", devices: true, wantErr: "volume data has volumeMode Filesystem, but is specified in volumeDevices"},
		{name: "block in volumeDevices", mode: &block, devices: true},
		{name: "block unused", mode: &block},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: v1.PersistentVolumeSpec{VolumeMode: tt.mode}}
			uses := volumeUses{mounts: map[string]bool{"data": tt.mounts}, devices: map[string]bool{"data": tt.devices}}
			err := checkVolumeMode("data", pv, uses)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Errorf("checkVolumeMode = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestSetUpVolumeModeMismatch: the mismatch is found through any container
// of the pod and reported as the kubelet reports it.
func TestSetUpVolumeModeMismatch(t *testing.T) {
	e := newTestEnv(t)
	pod := testPod(claimVolume("data", "claim", false))
	pod.Spec.InitContainers = []v1.Container{{Name: "init", VolumeDevices: []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}}}
	claim, pv := boundPair("claim", "pv-1", hostPathPV(t.TempDir()))
	e.f.setClaim(claim)
	e.f.setPV(pv)
	err := e.m.SetUp(context.Background(), pod)
	want := "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: volume data has volumeMode Filesystem, but is specified in volumeDevices"
	if err == nil || err.Error() != want {
		t.Fatalf("SetUp error = %v, want %q", err, want)
	}
}

func localPV(path string) v1.PersistentVolumeSource {
	return v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: path}}
}

func withHostnameAffinity(pv *v1.PersistentVolume, hostname string) {
	pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{hostname}}},
	}}}}
}

func TestLocalPersistentVolume(t *testing.T) {
	nodeLabels := func(context.Context) (map[string]string, error) {
		return map[string]string{"kubernetes.io/hostname": "node-a"}, nil
	}
	tests := []struct {
		name     string
		affinity string
		readOnly bool
		wantErr  string
		wantOpts []string
	}{
		{name: "affinity matches", affinity: "node-a", wantOpts: []string{"bind"}},
		{name: "read-only claim", affinity: "node-a", readOnly: true, wantOpts: []string{"bind", "ro"}},
		{name: "affinity names another node", affinity: "node-b",
			wantErr: `MountVolume.NodeAffinity check failed for volume "data" : no matching NodeSelectorTerms`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, WithNodeLabels(nodeLabels))
			local := t.TempDir()
			pod := testPod(claimVolume("data", "claim", tt.readOnly))
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
			claim, pv := boundPair("claim", "pv-1", localPV(local))
			withHostnameAffinity(pv, tt.affinity)
			e.f.setClaim(claim)
			e.f.setPV(pv)
			err := e.m.SetUp(context.Background(), pod)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("SetUp error = %v, want %q", err, tt.wantErr)
				}
				if len(e.mounter.GetLog()) != 0 {
					t.Errorf("mounted %v for a volume of another node", e.mounter.GetLog())
				}
				return
			}
			if err != nil {
				t.Fatalf("SetUp: %v", err)
			}
			dir := filepath.Join(e.m.PodDir(pod.UID), "volumes", "kubernetes.io~local-volume", "pv-1")
			mps, _ := e.mounter.List()
			if len(mps) != 1 || mps[0].Device != local || mps[0].Path != dir || !slices.Equal(mps[0].Opts, tt.wantOpts) {
				t.Fatalf("mounts = %+v, want %s on %s with %v", mps, local, dir, tt.wantOpts)
			}
			mounts, err := e.m.Mounts(pod, &pod.Spec.Containers[0], 0, nil, nil)
			if err != nil {
				t.Fatalf("Mounts: %v", err)
			}
			if mounts[0].HostPath != dir || mounts[0].Readonly != tt.readOnly {
				t.Errorf("mount = %v, want %s read-only %v", mounts[0], dir, tt.readOnly)
			}
			// A second SetUp after a restart keeps the mount as it is.
			e.m.forgetSetUp(pod.UID)
			if err := e.m.SetUp(context.Background(), pod); err != nil {
				t.Fatalf("second SetUp: %v", err)
			}
			if mps, _ := e.mounter.List(); len(mps) != 1 {
				t.Errorf("mounts after a second SetUp = %+v, want one", mps)
			}
		})
	}
}

func TestLocalPersistentVolumeRefusesBlockDevices(t *testing.T) {
	e := newTestEnv(t)
	pod := testPod(claimVolume("data", "claim", false))
	claim, pv := boundPair("claim", "pv-1", localPV("/dev/null"))
	e.f.setClaim(claim)
	e.f.setPV(pv)
	// /dev/null is a character device: refused as not a directory.
	err := e.m.SetUp(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), "local volume pv-1: /dev/null is not a directory") {
		t.Fatalf("SetUp error = %v, want the path refused", err)
	}
	if blocks, _ := filepath.Glob("/dev/loop[0-9]*"); len(blocks) > 0 {
		pv.Spec.Local.Path = blocks[0]
		e.f.setPV(pv)
		err := e.m.SetUp(context.Background(), pod)
		if err == nil || !strings.Contains(err.Error(), "is a block device, and nodelet mounts only directories") {
			t.Fatalf("SetUp error = %v, want the block device refused", err)
		}
	}
}

// TestLocalPersistentVolumeFSGroup: a writable local PV is handed to the
// pod's fsGroup; a read-only one is left alone.
func TestLocalPersistentVolumeFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a directory's group needs root")
	}
	for _, readOnly := range []bool{false, true} {
		e := newTestEnv(t)
		local := t.TempDir()
		pod := testPod(claimVolume("data", "claim", readOnly))
		pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptrTo(int64(4321))}
		claim, pv := boundPair("claim", "pv-1", localPV(local))
		e.f.setClaim(claim)
		e.f.setPV(pv)
		// The fake mounter mounts nothing: the mount point is what the
		// ownership walk sees, so give it a file to hand over.
		dir := filepath.Join(e.m.PodDir(pod.UID), "volumes", "kubernetes.io~local-volume", "pv-1")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := e.m.SetUp(context.Background(), pod); err != nil {
			t.Fatalf("SetUp: %v", err)
		}
		gid, _ := statOf(t, filepath.Join(dir, "f"))
		if readOnly && gid == 4321 || !readOnly && gid != 4321 {
			t.Errorf("read-only %v: group of the volume's file = %d", readOnly, gid)
		}
	}
}

// TestHostPathPersistentVolume: the PV's path is checked against its type
// and mounted as it is, read-only when the claim source says so, never
// handed to the fsGroup; a subPath of it goes through the safe subPath code.
func TestHostPathPersistentVolume(t *testing.T) {
	e := newTestEnv(t)
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "sub", "marker"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := testPod(claimVolume("data", "claim", true), claimVolume("missing", "other", false))
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptrTo(int64(4321))}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "data", MountPath: "/sub", SubPath: "sub"},
	}
	claim, pv := boundPair("claim", "pv-1", hostPathPV(host))
	e.f.setClaim(claim)
	e.f.setPV(pv)
	dirType := v1.HostPathDirectory
	other, otherPV := boundPair("other", "pv-2", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: filepath.Join(host, "nope"), Type: &dirType}})
	e.f.setClaim(other)
	e.f.setPV(otherPV)
	err := e.m.SetUp(context.Background(), pod)
	want := `MountVolume.SetUp failed for volume "missing" : hostPath type check failed: ` + filepath.Join(host, "nope") + " does not exist (type Directory)"
	if err == nil || err.Error() != want {
		t.Fatalf("SetUp error = %v, want %q", err, want)
	}
	pod.Spec.Volumes = pod.Spec.Volumes[:1]
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	t.Cleanup(func() {
		if err := e.m.TearDown(context.Background(), pod.UID); err != nil {
			t.Errorf("TearDown: %v", err)
		}
	})
	mounts, err := e.m.Mounts(pod, &pod.Spec.Containers[0], 0, nil, nil)
	if err != nil {
		t.Fatalf("Mounts: %v", err)
	}
	if mounts[0].HostPath != host || !mounts[0].Readonly {
		t.Errorf("mount = %v, want %s read-only", mounts[0], host)
	}
	sub := subPathTarget(e, pod, "data", 1)
	if mounts[1].HostPath != sub || !mounts[1].Readonly {
		t.Errorf("subPath mount = %v, want %s read-only", mounts[1], sub)
	}
	if got := readFile(t, filepath.Join(sub, "marker")); got != "x" {
		t.Errorf("the subPath mount reads %q, want the PV's file", got)
	}
	if gid, _ := statOf(t, filepath.Join(host, "sub", "marker")); gid == 4321 {
		t.Error("a hostPath PV was handed to the fsGroup")
	}
}

// fakeCSI records what it publishes and can fail UnpublishPod.
type fakeCSI struct {
	mu           sync.Mutex
	root         string
	published    []CSIVolume
	unpublished  []types.UID
	unpublishErr error
	// calls are the calls in order, shared with a recording mounter.
	calls *[]string
}

func (f *fakeCSI) Publish(_ context.Context, pod *v1.Pod, cv *CSIVolume) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, *cv)
	return filepath.Join(f.root, string(pod.UID), cv.SpecName, "mount"), nil
}

func (f *fakeCSI) UnpublishPod(_ context.Context, uid types.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls != nil {
		*f.calls = append(*f.calls, "unpublish")
	}
	f.unpublished = append(f.unpublished, uid)
	return f.unpublishErr
}

func TestInlineVolumeHandle(t *testing.T) {
	// sha256("uid-1" + "scratch"), as `printf uid-1scratch | sha256sum` gives it.
	const want = "csi-a919eb5a57ed1bf8c61a802fc713b36e9bfa4fbf009dfb5f4206d253a3a3dc32"
	if got := inlineVolumeHandle("uid-1", "scratch"); got != want {
		t.Errorf("inlineVolumeHandle = %s, want %s", got, want)
	}
}

func TestCSIVolumes(t *testing.T) {
	csi := &fakeCSI{root: "/var/lib/csi"}
	e := newTestEnv(t, WithCSI(csi))
	pod := testPod(
		v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
			Driver: "inline.example.com", ReadOnly: ptrTo(true), FSType: ptrTo("ext4"),
			VolumeAttributes:     map[string]string{"size": "1Gi"},
			NodePublishSecretRef: &v1.LocalObjectReference{Name: "creds"},
		}}},
		claimVolume("data", "claim", false),
	)
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "inline", MountPath: "/inline"}, {Name: "data", MountPath: "/data"}}
	claim, pv := boundPair("claim", "pv-1", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
		Driver: "disk.example.com", VolumeHandle: "vol-123", ReadOnly: true, FSType: "xfs",
		NodeStageSecretRef: &v1.SecretReference{Namespace: "kube-system", Name: "stage"},
	}})
	pv.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	pv.Spec.MountOptions = []string{"noatime"}
	e.f.setClaim(claim)
	e.f.setPV(pv)
	if err := e.m.SetUp(context.Background(), pod); err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	if len(csi.published) != 2 {
		t.Fatalf("published %d volumes, want 2", len(csi.published))
	}
	inline, persistent := csi.published[0], csi.published[1]
	if inline.Driver != "inline.example.com" || inline.VolumeHandle != inlineVolumeHandle("uid-1", "inline") ||
		inline.SpecName != "inline" || inline.VolumeName != "inline" || inline.PVName != "" || !inline.ReadOnly ||
		inline.FSType != "ext4" || inline.Attributes["size"] != "1Gi" || !inline.Ephemeral ||
		inline.NodePublishSecretRef == nil || *inline.NodePublishSecretRef != (v1.SecretReference{Namespace: "ns", Name: "creds"}) {
		t.Errorf("inline volume = %+v", inline)
	}
	if persistent.Driver != "disk.example.com" || persistent.VolumeHandle != "vol-123" || persistent.SpecName != "pv-1" ||
		persistent.VolumeName != "data" || persistent.PVName != "pv-1" || !persistent.ReadOnly || persistent.FSType != "xfs" ||
		persistent.Ephemeral || persistent.Block || !slices.Equal(persistent.MountOptions, []string{"noatime"}) ||
		!slices.Equal(persistent.AccessModes, pv.Spec.AccessModes) || persistent.NodeStageSecretRef.Name != "stage" {
		t.Errorf("persistent volume = %+v", persistent)
	}
	mounts, err := e.m.Mounts(pod, &pod.Spec.Containers[0], 0, nil, nil)
	if err != nil {
		t.Fatalf("Mounts: %v", err)
	}
	want := []*runtimeapi.Mount{
		{ContainerPath: "/inline", HostPath: "/var/lib/csi/uid-1/inline/mount", Readonly: true},
		{ContainerPath: "/data", HostPath: "/var/lib/csi/uid-1/pv-1/mount", Readonly: true},
	}
	for i := range want {
		if mounts[i].String() != want[i].String() {
			t.Errorf("mount %d = %v, want %v", i, mounts[i], want[i])
		}
	}
	paths := e.m.PodVolumePaths(pod)
	if paths["data"].Kind != KindCSI || paths["data"].ClaimName != "claim" || paths["inline"].Path != "/var/lib/csi/uid-1/inline/mount" {
		t.Errorf("PodVolumePaths = %+v", paths)
	}
}

func TestCSIVolumeWithoutCSI(t *testing.T) {
	e := newTestEnv(t)
	pod := testPod(v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "inline.example.com"}}})
	err := e.m.SetUp(context.Background(), pod)
	want := `MountVolume.SetUp failed for volume "inline" : kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name inline.example.com not found in the list of registered CSI drivers`
	if err == nil || err.Error() != want {
		t.Fatalf("SetUp error = %v, want %q", err, want)
	}
}

type fakeMounterAlias = mount.FakeMounter

// recordingMounter records unmounts in the calls it shares with a fakeCSI.
type recordingMounter struct {
	*fakeMounterAlias
	calls *[]string
}

func (r *recordingMounter) Unmount(target string) error {
	*r.calls = append(*r.calls, "unmount")
	return r.fakeMounterAlias.Unmount(target)
}

func TestTearDownUnpublishesCSIFirst(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var calls []string
		csi := &fakeCSI{root: "/var/lib/csi", calls: &calls}
		if fail {
			csi.unpublishErr = errors.New("driver gone")
		}
		e := newTestEnv(t, WithCSI(csi))
		e.m.mounter = &recordingMounter{fakeMounterAlias: e.mounter, calls: &calls}
		pod := testPod(v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
		if err := e.m.SetUp(context.Background(), pod); err != nil {
			t.Fatalf("SetUp: %v", err)
		}
		err := e.m.TearDown(context.Background(), pod.UID)
		_, statErr := os.Stat(e.m.PodDir(pod.UID))
		if fail {
			if err == nil || !strings.Contains(err.Error(), "driver gone") {
				t.Errorf("TearDown = %v, want the unpublish error", err)
			}
			if statErr != nil || !slices.Equal(calls, []string{"unpublish"}) {
				t.Errorf("after a failed unpublish: pod directory %v, calls %v; want it kept and nothing unmounted", statErr, calls)
			}
			continue
		}
		if err != nil {
			t.Fatalf("TearDown: %v", err)
		}
		if !slices.Equal(calls, []string{"unpublish", "unmount"}) || statErr == nil {
			t.Errorf("calls %v, pod directory %v; want unpublish, then unmount, then the directory removed", calls, statErr)
		}
	}
}

// TestBlockVolumes: a Block PV is resolved to a block device that the
// container gets through its volumeDevices, read-only for a read-only claim.
func TestBlockVolumes(t *testing.T) {
	block := v1.PersistentVolumeBlock
	csiSource := v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "disk.example.com", VolumeHandle: "vol-1"}}
	loop := "/dev/loop0"
	if info, err := os.Stat(loop); err != nil || info.Mode().Type() != os.ModeDevice {
		loop = ""
	}
	tests := []struct {
		name     string
		src      v1.PersistentVolumeSource
		readOnly bool
		want     *runtimeapi.Device
		wantErr  string
	}{
		{name: "CSI", src: csiSource,
			want: &runtimeapi.Device{ContainerPath: "/dev/xvda", HostPath: "/var/lib/csi/uid-1/pv-1/mount", Permissions: "mrw"}},
		{name: "CSI read-only", src: csiSource, readOnly: true,
			want: &runtimeapi.Device{ContainerPath: "/dev/xvda", HostPath: "/var/lib/csi/uid-1/pv-1/mount", Permissions: "r"}},
		{name: "local directory", src: localPV("/tmp"),
			wantErr: `MountVolume.SetUp failed for volume "data" : local volume pv-1 has volumeMode Block, but /tmp is not a block device`},
		{name: "hostPath", src: hostPathPV("/tmp"),
			wantErr: `MountVolume.SetUp failed for volume "data" : PersistentVolume pv-1 has volumeMode Block, which its source hostPath does not support`},
	}
	if loop != "" {
		tests = append(tests, struct {
			name     string
			src      v1.PersistentVolumeSource
			readOnly bool
			want     *runtimeapi.Device
			wantErr  string
		}{name: "local block device", src: localPV(loop),
			want: &runtimeapi.Device{ContainerPath: "/dev/xvda", HostPath: loop, Permissions: "mrw"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csi := &fakeCSI{root: "/var/lib/csi"}
			e := newTestEnv(t, WithCSI(csi))
			pod := testPod(claimVolume("data", "claim", tt.readOnly))
			pod.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
			claim, pv := boundPair("claim", "pv-1", tt.src)
			pv.Spec.VolumeMode = &block
			e.f.setClaim(claim)
			e.f.setPV(pv)
			err := e.m.SetUp(context.Background(), pod)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("SetUp error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SetUp: %v", err)
			}
			if tt.src.CSI != nil && (len(csi.published) != 1 || !csi.published[0].Block) {
				t.Errorf("published %+v, want one block volume", csi.published)
			}
			devices, err := e.m.Devices(pod, &pod.Spec.Containers[0])
			if err != nil {
				t.Fatalf("Devices: %v", err)
			}
			if len(devices) != 1 || devices[0].String() != tt.want.String() {
				t.Errorf("Devices = %v, want %v", devices, tt.want)
			}
			if len(e.mounter.GetLog()) != 0 {
				t.Errorf("a block volume was mounted: %v", e.mounter.GetLog())
			}
		})
	}
}
