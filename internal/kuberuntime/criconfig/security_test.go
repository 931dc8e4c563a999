package criconfig

import (
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestLocalhostSeccompProfileUnderRoot(t *testing.T) {
	localhost := func(path string) *v1.SeccompProfile {
		return &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(path)}
	}
	tests := []struct {
		name           string
		profile        *v1.SeccompProfile
		seccompDefault bool
		want           *runtimeapi.SecurityProfile // nil: a *ConfigError
	}{
		{"none is unconfined", nil, false, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}},
		{"none is the runtime's default with seccompDefault", nil, true, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
		{"unconfined asked for stays unconfined with seccompDefault", &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}, true,
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}},
		{"runtime default", &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}, false,
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
		{"localhost under the root", localhost("profiles/deny-mkdir.json"), false,
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/nodelet/seccomp/profiles/deny-mkdir.json"}},
		{"localhost escaping the root", localhost("../../../etc/x.json"), false, nil},
		{"localhost absolute", localhost("/etc/x.json"), false, nil},
		{"localhost empty", localhost(""), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := seccompProfile(tt.profile, "/var/lib/nodelet/seccomp", tt.seccompDefault)
			if tt.want == nil {
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want a *ConfigError", err)
				}
				return
			}
			if err != nil || got.ProfileType != tt.want.ProfileType || got.LocalhostRef != tt.want.LocalhostRef {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestAppArmorProfileReachesTheRuntime(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		SecurityContext: &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}},
		Containers: []v1.Container{
			{Name: "inherits"},
			{Name: "own", SecurityContext: &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{
				Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("k8s-deny-write")}}},
			{Name: "annotated"},
		},
	}}
	pod.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "annotated": "unconfined"}
	tests := []struct {
		container  int
		want       *runtimeapi.SecurityProfile
		wantLegacy string
	}{
		{0, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, "runtime/default"},
		{1, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-deny-write"}, "localhost/k8s-deny-write"},
		{2, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, "unconfined"},
	}
	for _, tt := range tests {
		c := &pod.Spec.Containers[tt.container]
		sc, err := containerSecurityContext(pod, c, ContainerOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		legacy := sc.ApparmorProfile //nolint:staticcheck // the field runtimes before the structured one read
		if sc.Apparmor.String() != tt.want.String() || legacy != tt.wantLegacy {
			t.Errorf("%s: apparmor %v %q, want %v %q", c.Name, sc.Apparmor, legacy, tt.want, tt.wantLegacy)
		}
	}
}

// The runtime masks nothing it is not told to: every container gets the
// kubelet's masked and read-only paths unless its procMount is Unmasked.
func TestProcMountMasksPaths(t *testing.T) {
	for _, tc := range []struct {
		name      string
		procMount *v1.ProcMountType
		masked    bool
	}{
		{"unset", nil, true},
		{"Default", ptr.To(v1.DefaultProcMount), true},
		{"Unmasked", ptr.To(v1.UnmaskedProcMount), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", SecurityContext: &v1.SecurityContext{ProcMount: tc.procMount}}
			pod := &v1.Pod{Spec: v1.PodSpec{HostUsers: ptr.To(false), Containers: []v1.Container{*c}}}
			sc, err := containerSecurityContext(pod, c, ContainerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.masked {
				if len(sc.MaskedPaths) != 0 || len(sc.ReadonlyPaths) != 0 {
					t.Fatalf("masked %v, read-only %v; want none", sc.MaskedPaths, sc.ReadonlyPaths)
				}
				return
			}
			if !slices.Contains(sc.MaskedPaths, "/proc/kcore") || !slices.Contains(sc.MaskedPaths, "/sys/firmware") {
				t.Errorf("masked %v; want /proc/kcore and /sys/firmware among them", sc.MaskedPaths)
			}
			if !slices.Contains(sc.ReadonlyPaths, "/proc/sys") || !slices.Contains(sc.ReadonlyPaths, "/proc/sysrq-trigger") {
				t.Errorf("read-only %v; want /proc/sys and /proc/sysrq-trigger among them", sc.ReadonlyPaths)
			}
			sc.MaskedPaths[0] = "changed"
			if defaultMaskedPaths[0] == "changed" {
				t.Error("the defaults are shared with the request")
			}
		})
	}
}
