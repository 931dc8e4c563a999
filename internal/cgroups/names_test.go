package cgroups

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestNames(t *testing.T) {
	tests := []struct {
		name     Name
		cgroupfs string
		slice    string
		systemd  string
	}{
		{Name{}, "/", "-.slice", "/"},
		{Name{"kubepods"}, "/kubepods", "kubepods.slice", "/kubepods.slice"},
		{Name{"kubepods", "burstable"}, "/kubepods/burstable", "kubepods-burstable.slice", "/kubepods.slice/kubepods-burstable.slice"},
		{
			Name{"kubepods", "besteffort", "pod12ab-34cd"}, "/kubepods/besteffort/pod12ab-34cd",
			"kubepods-besteffort-pod12ab_34cd.slice",
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod12ab_34cd.slice",
		},
		{
			Name{"nodelet-e2e", "kubepods", "pod1-2"}, "/nodelet-e2e/kubepods/pod1-2",
			"nodelet_e2e-kubepods-pod1_2.slice",
			"/nodelet_e2e.slice/nodelet_e2e-kubepods.slice/nodelet_e2e-kubepods-pod1_2.slice",
		},
	}
	for _, tt := range tests {
		if got := tt.name.Cgroupfs(); got != tt.cgroupfs {
			t.Errorf("%v.Cgroupfs() = %q, want %q", tt.name, got, tt.cgroupfs)
		}
		if got := tt.name.SystemdSlice(); got != tt.slice {
			t.Errorf("%v.SystemdSlice() = %q, want %q", tt.name, got, tt.slice)
		}
		if got := tt.name.Systemd(); got != tt.systemd {
			t.Errorf("%v.Systemd() = %q, want %q", tt.name, got, tt.systemd)
		}
		if got := Cgroupfs.Name(tt.name); got != tt.cgroupfs {
			t.Errorf("Cgroupfs.Name(%v) = %q", tt.name, got)
		}
		if got := Systemd.Name(tt.name); got != tt.systemd {
			t.Errorf("Systemd.Name(%v) = %q", tt.name, got)
		}
		empty := cmpopts.EquateEmpty()
		if got := ParseCgroupfs(tt.cgroupfs); !cmp.Equal(got, tt.name, empty) {
			t.Errorf("ParseCgroupfs(%q) = %v, want %v", tt.cgroupfs, got, tt.name)
		}
		for _, s := range []string{tt.slice, tt.systemd} {
			got, err := ParseSystemd(s)
			if err != nil || !cmp.Equal(got, tt.name, empty) {
				t.Errorf("ParseSystemd(%q) = %v, %v, want %v", s, got, err, tt.name)
			}
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		driver  Driver
		in      string
		want    Name
		wantErr bool
	}{
		{Cgroupfs, "", Name{}, false},
		{Cgroupfs, "/nodelet", Name{"nodelet"}, false},
		{Cgroupfs, "nodelet/a/", Name{"nodelet", "a"}, false},
		{Cgroupfs, "/a/../b", Name{"b"}, false},
		{Systemd, "", Name{}, false},
		{Systemd, "nodelet.slice", Name{"nodelet"}, false},
		{Systemd, "/nodelet.slice", Name{"nodelet"}, false},
		{Systemd, "/system.slice/kubelet.service", nil, true},
		{Systemd, "a--b.slice", nil, true},
		{Systemd, "/x.slice/a-b.slice", nil, true},
	}
	for _, tt := range tests {
		got, err := tt.driver.Parse(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s.Parse(%q) error = %v, want error %v", tt.driver, tt.in, err, tt.wantErr)
			continue
		}
		if !cmp.Equal(got, tt.want, cmpopts.EquateEmpty()) {
			t.Errorf("%s.Parse(%q) = %v, want %v", tt.driver, tt.in, got, tt.want)
		}
	}
}

func TestChildName(t *testing.T) {
	parent := Name{"kubepods", "burstable"}
	tests := []struct {
		driver Driver
		dir    string
		want   Name
		ok     bool
	}{
		{Cgroupfs, "podabc", Name{"kubepods", "burstable", "podabc"}, true},
		{Systemd, "kubepods-burstable-poda_b.slice", Name{"kubepods", "burstable", "poda-b"}, true},
		{Systemd, "kubepods-besteffort-podab.slice", nil, false},
		{Systemd, "cri-containerd-123.scope", nil, false},
		{Systemd, "kubepods-burstable-pod1-x.slice", nil, false},
	}
	for _, tt := range tests {
		got, ok := tt.driver.ChildName(parent, tt.dir)
		if ok != tt.ok || !cmp.Equal(got, tt.want) {
			t.Errorf("%s.ChildName(%v, %q) = %v, %v, want %v, %v", tt.driver, parent, tt.dir, got, ok, tt.want, tt.ok)
		}
	}
}

func TestPodUID(t *testing.T) {
	for _, tt := range []struct {
		base string
		uid  string
		ok   bool
	}{
		{"pod1234-5678", "1234-5678", true},
		{"pod", "", false},
		{"burstable", "", false},
		{"cri-containerd-1", "", false},
	} {
		uid, ok := PodUID(tt.base)
		if string(uid) != tt.uid || ok != tt.ok {
			t.Errorf("PodUID(%q) = %q, %v, want %q, %v", tt.base, uid, ok, tt.uid, tt.ok)
		}
	}
}
