package criconfig

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestRecursiveReadOnly(t *testing.T) {
	ifPossible := ptr.To(v1.RecursiveReadOnlyIfPossible)
	enabled := ptr.To(v1.RecursiveReadOnlyEnabled)
	disabled := ptr.To(v1.RecursiveReadOnlyDisabled)
	for _, tc := range []struct {
		name      string
		vm        v1.VolumeMount
		supported bool
		want      bool
		wantErr   string
	}{
		{name: "not asked", vm: v1.VolumeMount{Name: "v", ReadOnly: true}, supported: true},
		{name: "disabled, writable", vm: v1.VolumeMount{Name: "v", RecursiveReadOnly: disabled}, supported: true},
		{name: "if possible, supported", vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: ifPossible}, supported: true, want: true},
		{name: "if possible, unsupported: plain read-only", vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: ifPossible}},
		{name: "enabled, supported", vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: enabled}, supported: true, want: true},
		{name: "enabled, unsupported", vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: enabled},
			wantErr: `volume "v" requested recursive read-only mode, but it is not supported by the runtime`},
		{name: "enabled propagation None", vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: enabled,
			MountPropagation: ptr.To(v1.MountPropagationNone)}, supported: true, want: true},
		{name: "not read-only", vm: v1.VolumeMount{Name: "v", RecursiveReadOnly: ifPossible}, supported: true,
			wantErr: `volume "v" requested recursive read-only mode, but it is not read-only`},
		{name: "propagation", vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: enabled,
			MountPropagation: ptr.To(v1.MountPropagationHostToContainer)}, supported: true,
			wantErr: `volume "v" requested recursive read-only mode, but it is not compatible with propagation "HostToContainer"`},
		{name: "unknown mode", vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyMode("Always"))},
			supported: true, wantErr: `volume "v": unknown recursive read-only mode "Always"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RecursiveReadOnly(&tc.vm, tc.supported)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("RecursiveReadOnly = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

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
	if WantsRecursiveReadOnly(ifPossibleOnly) != true || WantsRecursiveReadOnly(&v1.Container{VolumeMounts: c.VolumeMounts[1:2]}) {
		t.Error("WantsRecursiveReadOnly")
	}
}
