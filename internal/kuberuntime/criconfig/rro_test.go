package criconfig

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/podspec"
)

func TestApplyRecursiveReadOnly(t *testing.T) {
	c := &v1.Container{VolumeMounts: []v1.VolumeMount{
		{Name: "a", MountPath: "/a", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled)},
		{Name: "b", MountPath: "/b", ReadOnly: true},
		{Name: "c", MountPath: "/c", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)},
	}}
	mounts := func() []*runtimeapi.Mount {
		return []*runtimeapi.Mount{{ContainerPath: "/a", Readonly: true}, {ContainerPath: "/b", Readonly: true},
			{ContainerPath: "/c", Readonly: true}, {ContainerPath: "/etc/hosts"}}
	}

	got := mounts()
	if err := ApplyRecursiveReadOnly(c, got, true); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, true, false} {
		if got[i].RecursiveReadOnly != want {
			t.Errorf("supported: mount %s RecursiveReadOnly = %v, want %v", got[i].ContainerPath, got[i].RecursiveReadOnly, want)
		}
	}

	got = mounts()
	if err := ApplyRecursiveReadOnly(c, got, false); err == nil {
		t.Fatal("Enabled on a runtime without support: want an error")
	}
	for _, m := range got {
		if m.RecursiveReadOnly {
			t.Errorf("unsupported: mount %s marked after an error", m.ContainerPath)
		}
	}

	ifPossibleOnly := &v1.Container{VolumeMounts: c.VolumeMounts[1:]}
	got = mounts()
	if err := ApplyRecursiveReadOnly(ifPossibleOnly, got, false); err != nil {
		t.Fatal(err)
	}
	for _, m := range got {
		if m.RecursiveReadOnly {
			t.Errorf("IfPossible without support: mount %s marked", m.ContainerPath)
		}
	}

	if err := ApplyRecursiveReadOnly(c, []*runtimeapi.Mount{{ContainerPath: "/b"}}, true); err == nil {
		t.Error("a mount that was not made: want an error")
	}
	if podspec.WantsRecursiveReadOnly(ifPossibleOnly) != true || podspec.WantsRecursiveReadOnly(&v1.Container{VolumeMounts: c.VolumeMounts[1:2]}) {
		t.Error("WantsRecursiveReadOnly")
	}
}
