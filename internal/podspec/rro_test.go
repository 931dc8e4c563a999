package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
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
