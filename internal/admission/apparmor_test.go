package admission

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestAdmitAppArmor(t *testing.T) {
	on := AppArmor{Loaded: map[string]bool{"k8s-deny-write": true}}
	off := AppArmor{Disabled: errors.New("AppArmor is not enabled on the host")}
	unreadable := AppArmor{LoadedErr: errors.New("listing loaded AppArmor profiles: permission denied")}
	withProfile := func(p *v1.AppArmorProfile) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c",
			SecurityContext: &v1.SecurityContext{AppArmorProfile: p}}}}}
	}
	localhost := func(name string) *v1.AppArmorProfile {
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To(name)}
	}
	annotated := func(value string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "c": value}},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
		}
	}
	podLevel := &v1.Pod{Spec: v1.PodSpec{
		SecurityContext: &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}},
		Containers:      []v1.Container{{Name: "c"}},
	}}
	cases := []struct {
		name    string
		aa      AppArmor
		pod     *v1.Pod
		wantMsg string // empty: admitted
	}{
		{"no profile on a host without AppArmor", off, withProfile(nil), ""},
		{"unconfined on a host without AppArmor", off, withProfile(&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}), ""},
		{"runtime/default on a host without AppArmor", off, withProfile(&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}),
			"Cannot enforce AppArmor: AppArmor is not enabled on the host"},
		{"pod-level runtime/default on a host without AppArmor", off, podLevel, "Cannot enforce AppArmor: AppArmor is not enabled on the host"},
		{"legacy annotation on a host without AppArmor", off, annotated("runtime/default"), "Cannot enforce AppArmor: AppArmor is not enabled on the host"},
		{"legacy unconfined annotation", off, annotated("unconfined"), ""},
		{"runtime/default with AppArmor", on, withProfile(&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}), ""},
		{"loaded localhost profile", on, withProfile(localhost("k8s-deny-write")), ""},
		{"loaded localhost profile by annotation", on, annotated("localhost/k8s-deny-write"), ""},
		{"profile not loaded", on, withProfile(localhost("absent")), `Cannot enforce AppArmor: profile "absent" is not loaded`},
		{"empty localhost profile", on, withProfile(localhost(" ")), "Cannot enforce AppArmor: invalid empty AppArmor profile name"},
		{"loaded profiles not readable", unreadable, withProfile(localhost("k8s-deny-write")),
			"Cannot enforce AppArmor: listing loaded AppArmor profiles: permission denied"},
		{"runtime/default needs no loaded profiles", unreadable, withProfile(&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}), ""},
		{"loaded profiles not read", AppArmor{}, withProfile(localhost("k8s-deny-write")), `Cannot enforce AppArmor: profile "k8s-deny-write" is not loaded`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := admitAppArmor(tc.aa, tc.pod)
			if tc.wantMsg == "" {
				if !r.Admit {
					t.Fatalf("rejected: %s", r.Message)
				}
				return
			}
			if r.Admit || r.Reason != ReasonAppArmor || r.Message != tc.wantMsg {
				t.Fatalf("got %+v, want reason %s message %q", r, ReasonAppArmor, tc.wantMsg)
			}
		})
	}
}

func TestNeedsLoadedProfiles(t *testing.T) {
	withProfile := func(p *v1.AppArmorProfile) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "c",
			SecurityContext: &v1.SecurityContext{AppArmorProfile: p}}}}}
	}
	localhost := withProfile(&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("p")})
	off := Policy{AppArmor: AppArmor{Disabled: errors.New("AppArmor is not enabled on the host")}}
	cases := []struct {
		name   string
		policy Policy
		pod    *v1.Pod
		want   bool
	}{
		{"localhost profile on a node with AppArmor", Policy{}, localhost, true},
		{"localhost profile on a node without AppArmor", off, localhost, false},
		{"runtime/default", Policy{}, withProfile(&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}), false},
		{"no profile", Policy{}, withProfile(nil), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.NeedsLoadedProfiles(tc.pod); got != tc.want {
				t.Errorf("NeedsLoadedProfiles = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSysAppArmor(t *testing.T) {
	root := t.TempDir()
	s := SysAppArmor{Root: root}
	if err := s.Enabled(); err == nil || err.Error() != "AppArmor is not enabled on the host" {
		t.Errorf("without the module: %v", err)
	}
	write := func(path, data string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/module/apparmor/parameters/enabled", "N\n")
	if err := s.Enabled(); err == nil {
		t.Error("enabled=N reported as enabled")
	}
	write("sys/module/apparmor/parameters/enabled", "Y\n")
	if err := s.Enabled(); err != nil {
		t.Errorf("enabled=Y: %v", err)
	}
	write("sys/kernel/security/apparmor/profiles", "k8s-deny-write (enforce)\n/usr/bin/man (complain)\n")
	loaded, err := s.Loaded()
	if err != nil {
		t.Fatal(err)
	}
	if !loaded["k8s-deny-write"] || !loaded["/usr/bin/man"] || len(loaded) != 2 {
		t.Errorf("loaded = %v", loaded)
	}
}
