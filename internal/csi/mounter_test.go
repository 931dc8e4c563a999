package csi

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/volume"
)

func TestAccessMode(t *testing.T) {
	tests := []struct {
		modes []v1.PersistentVolumeAccessMode
		snmw  bool
		want  csipb.VolumeCapability_AccessMode_Mode
	}{
		{nil, false, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{nil, true, csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, false, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, true, csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, false, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, true, csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadOnlyMany}, false, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteMany}, true, csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		// Only the first mode counts, as for the kubelet.
		{[]v1.PersistentVolumeAccessMode{v1.ReadOnlyMany, v1.ReadWriteOnce}, false, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
	}
	for _, tt := range tests {
		if got := accessMode(tt.modes, tt.snmw); got != tt.want {
			t.Errorf("accessMode(%v, %v) = %v, want %v", tt.modes, tt.snmw, got, tt.want)
		}
	}
}

func TestCheckLifecycleMode(t *testing.T) {
	withModes := func(m ...storagev1.VolumeLifecycleMode) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{VolumeLifecycleModes: m}}
	}
	tests := []struct {
		name    string
		driver  *storagev1.CSIDriver
		mode    storagev1.VolumeLifecycleMode
		wantErr string
	}{
		{"no object, persistent", nil, storagev1.VolumeLifecyclePersistent, ""},
		{"no object, ephemeral", nil, storagev1.VolumeLifecycleEphemeral,
			`volume mode "Ephemeral" not supported by driver csi.example.com (no CSIDriver object)`},
		{"no modes listed, persistent", withModes(), storagev1.VolumeLifecyclePersistent, ""},
		{"listed", withModes(storagev1.VolumeLifecycleEphemeral), storagev1.VolumeLifecycleEphemeral, ""},
		{"not listed", withModes(storagev1.VolumeLifecycleEphemeral), storagev1.VolumeLifecyclePersistent,
			`volume mode "Persistent" not supported by driver csi.example.com (only supports ["Ephemeral"])`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkLifecycleMode(tt.driver, testDriver, tt.mode)
			if got := errText(err); got != tt.wantErr {
				t.Errorf("got %q, want %q", got, tt.wantErr)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestVolumeContext(t *testing.T) {
	pod := testPod("web")
	podInfo := &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{PodInfoOnMount: ptr.To(true)}}
	tests := []struct {
		name      string
		attrs     map[string]string
		driver    *storagev1.CSIDriver
		ephemeral bool
		tokens    string
		want      map[string]string
	}{
		{"nothing", nil, nil, false, "", nil},
		{"attributes only", map[string]string{"a": "b"}, &storagev1.CSIDriver{}, false, "", map[string]string{"a": "b"}},
		{"pod info", map[string]string{"a": "b"}, podInfo, false, "", map[string]string{
			"a":                                      "b",
			"csi.storage.k8s.io/pod.name":            "web",
			"csi.storage.k8s.io/pod.namespace":       "ns",
			"csi.storage.k8s.io/pod.uid":             "uid-web",
			"csi.storage.k8s.io/serviceAccount.name": "sa",
			"csi.storage.k8s.io/ephemeral":           "false",
		}},
		{"pod info, ephemeral, tokens", nil, podInfo, true, `{"aud":{}}`, map[string]string{
			"csi.storage.k8s.io/pod.name":              "web",
			"csi.storage.k8s.io/pod.namespace":         "ns",
			"csi.storage.k8s.io/pod.uid":               "uid-web",
			"csi.storage.k8s.io/serviceAccount.name":   "sa",
			"csi.storage.k8s.io/ephemeral":             "true",
			"csi.storage.k8s.io/serviceAccount.tokens": `{"aud":{}}`,
		}},
		{"tokens without pod info", nil, &storagev1.CSIDriver{}, false, `{"aud":{}}`, map[string]string{
			"csi.storage.k8s.io/serviceAccount.tokens": `{"aud":{}}`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := volumeContext(tt.attrs, tt.driver, pod, tt.ephemeral, tt.tokens)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestPlaceTokens(t *testing.T) {
	inSecrets := func(b *bool) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{ServiceAccountTokenInSecrets: b}}
	}
	secrets := map[string]string{"user": "u", tokensKey: "from the secret"}
	tests := []struct {
		name        string
		driver      *storagev1.CSIDriver
		secrets     map[string]string
		tokens      string
		wantSecrets map[string]string
		wantContext string
	}{
		{"no CSIDriver: volume context", nil, secrets, `{"a":{}}`, secrets, `{"a":{}}`},
		{"unset: volume context", inSecrets(nil), secrets, `{"a":{}}`, secrets, `{"a":{}}`},
		{"false: volume context", inSecrets(ptr.To(false)), secrets, `{"a":{}}`, secrets, `{"a":{}}`},
		{"true: secrets, replacing the key", inSecrets(ptr.To(true)), secrets, `{"a":{}}`,
			map[string]string{"user": "u", tokensKey: `{"a":{}}`}, ""},
		{"true without other secrets", inSecrets(ptr.To(true)), nil, `{"a":{}}`,
			map[string]string{tokensKey: `{"a":{}}`}, ""},
		{"true without tokens", inSecrets(ptr.To(true)), secrets, "", secrets, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(tt.secrets)
			gotSecrets, gotContext := placeTokens(tt.driver, tt.secrets, tt.tokens)
			if d := cmp.Diff(tt.wantSecrets, gotSecrets); d != "" {
				t.Errorf("secrets (-want +got):\n%s", d)
			}
			if gotContext != tt.wantContext {
				t.Errorf("volume context tokens %q, want %q", gotContext, tt.wantContext)
			}
			if d := cmp.Diff(before, tt.secrets); d != "" {
				t.Errorf("secrets changed (-before +after):\n%s", d)
			}
		})
	}
}

func TestApplyFSGroup(t *testing.T) {
	policy := func(p storagev1.FSGroupPolicy) *storagev1.CSIDriver {
		return &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{FSGroupPolicy: &p}}
	}
	rwo := []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	rwx := []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	tests := []struct {
		name   string
		driver *storagev1.CSIDriver
		vol    volume.CSIVolume
		want   bool
	}{
		{"default, rwo with fsType", nil, volume.CSIVolume{FSType: "ext4", AccessModes: rwo}, true},
		{"default, no fsType", nil, volume.CSIVolume{AccessModes: rwo}, false},
		{"default, rwx", nil, volume.CSIVolume{FSType: "ext4", AccessModes: rwx}, false},
		{"default, rwop", nil, volume.CSIVolume{FSType: "ext4", AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}}, true},
		{"default, no access modes", nil, volume.CSIVolume{FSType: "ext4"}, false},
		{"default, inline with fsType", nil, volume.CSIVolume{FSType: "ext4", Ephemeral: true}, true},
		{"default, read-only", nil, volume.CSIVolume{FSType: "ext4", AccessModes: rwo, ReadOnly: true}, false},
		{"File, rwx without fsType", policy(storagev1.FileFSGroupPolicy), volume.CSIVolume{AccessModes: rwx}, true},
		{"File, read-only", policy(storagev1.FileFSGroupPolicy), volume.CSIVolume{ReadOnly: true}, false},
		{"None", policy(storagev1.NoneFSGroupPolicy), volume.CSIVolume{FSType: "ext4", AccessModes: rwo}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := applyFSGroup(tt.driver, &tt.vol); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPublishStagesAndPublishes(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	e.attach("vol-1", map[string]string{"device": "/dev/xvdb"})
	v := pvVolume("vol-1")
	v.NodeStageSecretRef = &v1.SecretReference{Namespace: "secrets", Name: "stage"}
	v.NodePublishSecretRef = &v1.SecretReference{Namespace: "secrets", Name: "publish"}
	e.secrets["secrets/stage"] = &v1.Secret{Data: map[string][]byte{"k": []byte("stage-secret")}}
	e.secrets["secrets/publish"] = &v1.Secret{Data: map[string][]byte{"k": []byte("publish-secret")}}
	pod := testPod("web")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}

	target, err := e.publisher().Publish(context.Background(), pod, v)
	if err != nil {
		t.Fatal(err)
	}
	wantTarget := filepath.Join(e.root, "pods/uid-web/volumes/kubernetes.io~csi/pv-vol-1/mount")
	if target != wantTarget {
		t.Errorf("target %s, want %s", target, wantTarget)
	}
	staging := stagingPath(e.root, testDriver, "vol-1")
	capability := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"noatime"}}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	wantStage := []*csipb.NodeStageVolumeRequest{{
		VolumeId:          "vol-1",
		PublishContext:    map[string]string{"device": "/dev/xvdb"},
		StagingTargetPath: staging,
		VolumeCapability:  capability,
		Secrets:           map[string]string{"k": "stage-secret"},
		VolumeContext:     map[string]string{"attr": "value"},
	}}
	if d := cmp.Diff(wantStage, e.driver.stages, protocmp.Transform()); d != "" {
		t.Errorf("stage requests (-want +got):\n%s", d)
	}
	wantPublish := []*csipb.NodePublishVolumeRequest{{
		VolumeId:          "vol-1",
		PublishContext:    map[string]string{"device": "/dev/xvdb"},
		StagingTargetPath: staging,
		TargetPath:        wantTarget,
		VolumeCapability:  capability,
		Secrets:           map[string]string{"k": "publish-secret"},
		VolumeContext:     map[string]string{"attr": "value"},
	}}
	if d := cmp.Diff(wantPublish, e.driver.publishs, protocmp.Transform()); d != "" {
		t.Errorf("publish requests (-want +got):\n%s", d)
	}
	// The records, as the kubelet writes them.
	rec, err := readVolData(filepath.Dir(wantTarget))
	if err != nil {
		t.Fatal(err)
	}
	wantRec := volData{SpecVolID: "pv-vol-1", VolumeHandle: "vol-1", DriverName: testDriver, NodeName: testNode,
		AttachmentID: attachmentName("vol-1", testDriver, testNode), VolumeLifecycleMode: "Persistent"}
	if rec != wantRec {
		t.Errorf("publish record %+v, want %+v", rec, wantRec)
	}
	if rec, err := readVolData(filepath.Dir(staging)); err != nil || rec != (volData{VolumeHandle: "vol-1", DriverName: testDriver}) {
		t.Errorf("staging record %+v, %v", rec, err)
	}
	for _, dir := range []string{filepath.Dir(wantTarget), staging, filepath.Dir(staging)} {
		if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != dirMode {
			t.Errorf("%s: %v, %v; want mode %v", dir, st.Mode().Perm(), err, os.FileMode(dirMode))
		}
	}
	// ReadWriteOnce with an fsType: nodelet applies the fsGroup.
	if d := cmp.Diff([]string{wantTarget + " 2000"}, e.ownership); d != "" {
		t.Errorf("ownership (-want +got):\n%s", d)
	}

	// Every Publish asks the driver again, directories or not.
	if _, err := e.publisher().Publish(context.Background(), pod, v); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("stage") != 2 || e.driver.count("publish") != 2 {
		t.Errorf("second Publish: stage %d, publish %d calls, want 2 and 2", e.driver.count("stage"), e.driver.count("publish"))
	}
}

func TestPublishVolumeMountGroupAndCapabilities(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP, csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	e.csiDrivers[testDriver] = &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}
	pod := testPod("web")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	if _, err := e.publisher().Publish(context.Background(), pod, pvVolume("vol-1")); err != nil {
		t.Fatal(err)
	}
	if e.attachGets != 0 {
		t.Errorf("attachRequired false: %d VolumeAttachment reads", e.attachGets)
	}
	if e.driver.count("stage") != 0 {
		t.Error("a driver without STAGE_UNSTAGE_VOLUME was asked to stage")
	}
	req := e.driver.publishs[0]
	if req.StagingTargetPath != "" {
		t.Errorf("staging path %q without staging", req.StagingTargetPath)
	}
	if g := req.VolumeCapability.GetMount().GetVolumeMountGroup(); g != "2000" {
		t.Errorf("volume mount group %q, want 2000", g)
	}
	if m := req.VolumeCapability.GetAccessMode().GetMode(); m != csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER {
		t.Errorf("access mode %v", m)
	}
	// The driver applies the group: nodelet does not walk the volume.
	if len(e.ownership) != 0 {
		t.Errorf("ownership applied too: %v", e.ownership)
	}
}

func TestPublishEphemeralWithPodInfoAndTokens(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	e.csiDrivers[testDriver] = &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral},
		PodInfoOnMount:       ptr.To(true),
		TokenRequests:        []storagev1.TokenRequest{{Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}, {Audience: ""}},
	}}
	e.secrets["ns/inline"] = &v1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	v := &volume.CSIVolume{Driver: testDriver, VolumeHandle: "csi-inline", SpecName: "scratch", VolumeName: "scratch",
		Ephemeral: true, ReadOnly: true, NodePublishSecretRef: &v1.SecretReference{Name: "inline"}}
	if _, err := e.publisher().Publish(context.Background(), testPod("web"), v); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("stage") != 0 || e.attachGets != 0 {
		t.Errorf("inline volume staged (%d) or waited for attachment (%d)", e.driver.count("stage"), e.attachGets)
	}
	req := e.driver.publishs[0]
	if !req.Readonly || req.Secrets["k"] != "v" {
		t.Errorf("readonly %v, secrets %v", req.Readonly, req.Secrets)
	}
	if req.VolumeContext[ephemeralKey] != "true" || req.VolumeContext[podUIDKey] != "uid-web" {
		t.Errorf("volume context %v", req.VolumeContext)
	}
	var tokens map[string]map[string]string
	if err := json.Unmarshal([]byte(req.VolumeContext[tokensKey]), &tokens); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"vault": {"token": "token-vault", "expirationTimestamp": metav1.Unix(1800000000, 0).UTC().Format("2006-01-02T15:04:05Z")},
		"":      {"token": "token-", "expirationTimestamp": metav1.Unix(1800000000, 0).UTC().Format("2006-01-02T15:04:05Z")},
	}
	if d := cmp.Diff(want, tokens); d != "" {
		t.Errorf("tokens (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"web/vault 600", "web/ 3600"}, e.tokenCalls); d != "" {
		t.Errorf("token requests (-want +got):\n%s", d)
	}
	if rec, _ := readVolData(publishDataDir(e.root, "uid-web", "scratch")); rec.VolumeLifecycleMode != "Ephemeral" {
		t.Errorf("record %+v", rec)
	}
}

func TestPublishTokensInSecrets(t *testing.T) {
	e := newEnv(t)
	e.csiDrivers[testDriver] = &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{
		AttachRequired:               ptr.To(false),
		TokenRequests:                []storagev1.TokenRequest{{Audience: "vault"}},
		ServiceAccountTokenInSecrets: ptr.To(true),
	}}
	e.secrets["ns/pub"] = &v1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	v := &volume.CSIVolume{Driver: testDriver, VolumeHandle: "vol-1", SpecName: "pv-1", VolumeName: "data", PVName: "pv-1",
		Attributes: map[string]string{"a": "b"}, NodePublishSecretRef: &v1.SecretReference{Name: "pub", Namespace: "ns"}}
	if _, err := e.publisher().Publish(context.Background(), testPod("web"), v); err != nil {
		t.Fatal(err)
	}
	req := e.driver.publishs[0]
	if _, ok := req.VolumeContext[tokensKey]; ok {
		t.Errorf("tokens in the volume context: %v", req.VolumeContext)
	}
	if req.Secrets["k"] != "v" {
		t.Errorf("publish secret lost: %v", req.Secrets)
	}
	var tokens map[string]map[string]string
	if err := json.Unmarshal([]byte(req.Secrets[tokensKey]), &tokens); err != nil {
		t.Fatalf("tokens in the secrets: %v", err)
	}
	if tokens["vault"]["token"] != "token-vault" {
		t.Errorf("tokens %v", tokens)
	}
}

func TestPublishRefusals(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(e *env, v *volumeCSI)
		wantErr string
	}{
		{"ephemeral without CSIDriver", func(_ *env, v *volumeCSI) { v.Ephemeral = true },
			`volume mode "Ephemeral" not supported by driver csi.example.com (no CSIDriver object)`},
		{"not attached in time", func(e *env, _ *volumeCSI) { e.attachTimeoutZero = true }, "attachment timeout for volume vol-1"},
		{"attach error", func(e *env, _ *volumeCSI) {
			e.attachments[attachmentName("vol-1", testDriver, testNode)] = &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{
				AttachError: &storagev1.VolumeError{Message: "disk is busy"}}}
		}, "attachment for vol-1 failed: disk is busy"},
		{"driver not registered", func(e *env, _ *volumeCSI) { e.drivers.set(testDriver, nil) }, "CSI driver csi.example.com is not registered"},
		{"missing publish secret", func(_ *env, v *volumeCSI) { v.NodePublishSecretRef = &v1.SecretReference{Namespace: "x", Name: "y"} },
			`fetching NodePublishSecretRef x/y failed: secrets "y" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			v := pvVolume("vol-1")
			if tt.name != "not attached in time" && tt.name != "attach error" {
				e.attach("vol-1", nil)
			}
			tt.setup(e, v)
			_, err := e.publisher().Publish(context.Background(), testPod("web"), v)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
			if e.driver.count("publish") != 0 {
				t.Error("published anyway")
			}
			// Refused before any driver call: nothing to tear down.
			if exists(podCSIDir(e.root, "uid-web")) {
				t.Error("a refused volume left a record")
			}
		})
	}
}

type volumeCSI = volume.CSIVolume

func TestPublishWaitsForAttachment(t *testing.T) {
	e := newEnv(t)
	p := e.publisher()
	p.attachPoll = 0
	name := attachmentName("vol-1", testDriver, testNode)
	reads := 0
	p.volumeAttachment = func(context.Context, string) (*storagev1.VolumeAttachment, error) {
		reads++
		va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if reads == 3 {
			va.Status.Attached = true
			va.Status.AttachmentMetadata = map[string]string{"lun": "3"}
		}
		return va, nil
	}
	if _, err := p.Publish(context.Background(), testPod("web"), pvVolume("vol-1")); err != nil {
		t.Fatal(err)
	}
	if reads != 3 || e.driver.publishs[0].PublishContext["lun"] != "3" {
		t.Errorf("%d reads, publish context %v", reads, e.driver.publishs[0].PublishContext)
	}
}

func TestPublishReportsResourceExhausted(t *testing.T) {
	e := newEnv(t)
	p := e.publisher()
	var told []string
	p.resourceExhausted = func(driver string) { told = append(told, driver) }
	e.attachments[attachmentName("vol-1", testDriver, testNode)] = &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{
		AttachError: &storagev1.VolumeError{Message: "too many volumes", ErrorCode: ptr.To[int32](8)},
	}}
	_, err := p.Publish(context.Background(), testPod("web"), pvVolume("vol-1"))
	if err == nil || !strings.Contains(err.Error(), "too many volumes") {
		t.Errorf("error %v, want the attach error", err)
	}
	if d := cmp.Diff([]string{testDriver}, told); d != "" {
		t.Errorf("drivers told (-want +got):\n%s", d)
	}
}

func TestPublishFailureKeepsRecord(t *testing.T) {
	e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	e.attach("vol-1", nil)
	e.driver.failing("publish", errors.New("driver crashed"))
	if _, err := e.publisher().Publish(context.Background(), testPod("web"), pvVolume("vol-1")); err == nil {
		t.Fatal("Publish succeeded with a failing driver")
	}
	// Staged but not published: the records let a teardown undo the stage.
	if !exists(filepath.Join(publishDataDir(e.root, "uid-web", "pv-vol-1"), volDataFileName)) {
		t.Fatal("the pod's record is gone")
	}
	if err := e.publisher().UnpublishPod(context.Background(), "uid-web"); err != nil {
		t.Fatal(err)
	}
	if e.driver.count("unpublish") != 1 || e.driver.count("unstage") != 1 {
		t.Errorf("unpublish %d, unstage %d, want 1 and 1", e.driver.count("unpublish"), e.driver.count("unstage"))
	}
	assertGone(t, e, "uid-web", "vol-1")
}

// TestPublishCrashes kills a Publish before each driver call; a new
// publisher tears the pod down from what the first one recorded, with each
// driver call made once, and leaves the stage of a second pod alone.
func TestPublishCrashes(t *testing.T) {
	for _, step := range []string{stepStage, stepPublish} {
		for _, shared := range []bool{false, true} {
			t.Run(step+map[bool]string{true: "/shared"}[shared], func(t *testing.T) {
				e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
				ctx := context.Background()
				if shared {
					publishPods(t, e, "vol-1", "b")
				}
				e.attach("vol-1", nil)
				killed := e.publisher()
				killed.step = func(name string) error {
					if name == step {
						return errKilled
					}
					return nil
				}
				if _, err := killed.Publish(ctx, testPod("a"), pvVolume("vol-1")); !errors.Is(err, errKilled) {
					t.Fatalf("got %v, want the kill", err)
				}
				restarted := e.publisher()
				if err := restarted.UnpublishPod(ctx, "uid-a"); err != nil {
					t.Fatal(err)
				}
				if err := restarted.UnstageOrphans(ctx); err != nil {
					t.Fatal(err)
				}
				if got := e.driver.count("unpublish"); got != 1 {
					t.Errorf("unpublish calls %d, want 1", got)
				}
				if shared {
					staging := stagingPath(e.root, testDriver, "vol-1")
					if mounted, _ := e.driver.mounter.IsMountPoint(staging); !mounted || e.driver.count("unstage") != 0 {
						t.Fatalf("pod b's stage: mounted %v, %d unstages", mounted, e.driver.count("unstage"))
					}
					if err := restarted.UnpublishPod(ctx, "uid-b"); err != nil {
						t.Fatal(err)
					}
				}
				if got := e.driver.count("unstage"); got != 1 {
					t.Errorf("unstage calls %d, want 1", got)
				}
				assertGone(t, e, "uid-a", "vol-1")
				assertGone(t, e, "uid-b", "vol-1")
			})
		}
	}
}

// Until the attach/detach controller creates the attachment, the Node
// authorizer forbids reading it: the wait goes on, and a timeout says why.
func TestPublishWaitsThroughForbiddenAttachment(t *testing.T) {
	e := newEnv(t)
	p := e.publisher()
	p.attachPoll = 0
	name := attachmentName("vol-1", testDriver, testNode)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}, name,
		errors.New("no relationship found between node and this object"))
	reads := 0
	p.volumeAttachment = func(context.Context, string) (*storagev1.VolumeAttachment, error) {
		reads++
		if reads < 3 {
			return nil, forbidden
		}
		return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: storagev1.VolumeAttachmentStatus{Attached: true}}, nil
	}
	if _, err := p.Publish(context.Background(), testPod("web"), pvVolume("vol-1")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if reads != 3 {
		t.Errorf("%d reads, want 3", reads)
	}

	p = e.publisher()
	p.attachPoll, p.attachTimeout = 0, time.Nanosecond
	p.volumeAttachment = func(context.Context, string) (*storagev1.VolumeAttachment, error) { return nil, forbidden }
	_, err := p.Publish(context.Background(), testPod("web"), pvVolume("vol-1"))
	if err == nil || !strings.Contains(err.Error(), "attachment timeout for volume vol-1") || !apierrors.IsForbidden(errors.Unwrap(err)) {
		t.Errorf("error = %v, want the attachment timeout with the forbidden read", err)
	}
}

// recordingClock fires every After at once and records what was asked.
type recordingClock struct {
	clock.RealClock
	waits []time.Duration
}

func (c *recordingClock) After(d time.Duration) <-chan time.Time {
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}

// The attachment is looked for again soon after the first miss, then less
// often up to the poll period.
func TestAttachmentPollBacksOff(t *testing.T) {
	e := newEnv(t)
	p := e.publisher()
	rc := &recordingClock{}
	p.clock, p.attachPoll = rc, time.Second
	reads := 0
	p.volumeAttachment = func(context.Context, string) (*storagev1.VolumeAttachment, error) {
		reads++
		return &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{Attached: reads == 7}}, nil
	}
	if _, err := p.Publish(context.Background(), testPod("web"), pvVolume("vol-1")); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if diff := cmp.Diff(want, rc.waits); diff != "" {
		t.Errorf("waits between reads (-want +got):\n%s", diff)
	}
}

// TestPublishStageFailure: a staging the driver refused for good leaves no
// record, so the pod's teardown asks the driver nothing (the kubelet's
// "no NodeUnstage after a final NodeStage error"), unless another pod has
// the volume; an uncertain one keeps the records for the teardown.
func TestPublishStageFailure(t *testing.T) {
	for _, tc := range []struct {
		name          string
		err           error
		otherPod      bool
		wantUnpublish int
		wantUnstage   int
	}{
		{name: "final", err: status.Error(codes.InvalidArgument, "bad volume")},
		{name: "final, no gRPC status is uncertain", err: errors.New("connection reset"), wantUnpublish: 1, wantUnstage: 1},
		{name: "timed out", err: status.Error(codes.DeadlineExceeded, "slow"), wantUnpublish: 1, wantUnstage: 1},
		{name: "pending", err: status.Error(codes.Aborted, "busy"), wantUnpublish: 1, wantUnstage: 1},
		{name: "final, staged for another pod", err: status.Error(codes.Internal, "failed"), otherPod: true, wantUnstage: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
			e.attach("vol-1", nil)
			ctx := context.Background()
			if tc.otherPod {
				if _, err := e.publisher().Publish(ctx, testPod("db"), pvVolume("vol-1")); err != nil {
					t.Fatal(err)
				}
			}
			e.driver.failing("stage", tc.err)
			if _, err := e.publisher().Publish(ctx, testPod("web"), pvVolume("vol-1")); err == nil {
				t.Fatal("Publish succeeded with a failing stage")
			}
			e.driver.failing("stage", nil)
			if err := e.publisher().UnpublishPod(ctx, "uid-web"); err != nil {
				t.Fatal(err)
			}
			if tc.otherPod {
				if got := e.driver.count("unpublish") + e.driver.count("unstage"); got != 0 {
					t.Errorf("the other pod's volume was unpublished or unstaged %d times", got)
				}
				if err := e.publisher().UnpublishPod(ctx, "uid-db"); err != nil {
					t.Fatal(err)
				}
				tc.wantUnpublish++
			}
			if got := e.driver.count("unpublish"); got != tc.wantUnpublish {
				t.Errorf("NodeUnpublishVolume %d times, want %d", got, tc.wantUnpublish)
			}
			if got := e.driver.count("unstage"); got != tc.wantUnstage {
				t.Errorf("NodeUnstageVolume %d times, want %d", got, tc.wantUnstage)
			}
			assertGone(t, e, "uid-web", "vol-1")
		})
	}
}
