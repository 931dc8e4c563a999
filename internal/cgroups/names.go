package cgroups

import (
	"fmt"
	"path"
	"strings"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// Names of the kubelet's cgroups.
const (
	// KubepodsName is the cgroup that holds every pod, under cgroupRoot.
	KubepodsName = "kubepods"
	// BurstableName and BestEffortName hold the pods of their QoS class.
	BurstableName  = "burstable"
	BestEffortName = "besteffort"
	// PodPrefix starts the name of a pod's cgroup: pod<uid>.
	PodPrefix = "pod"

	systemdSuffix = ".slice"
)

// Name is a cgroup as the components of its path from the root of the
// hierarchy, independent of the driver: {"nodelet", "kubepods",
// "burstable", "pod<uid>"}. The empty Name is the root.
type Name []string

// Child is n's child c.
func (n Name) Child(c string) Name {
	out := make(Name, 0, len(n)+1)
	return append(append(out, n...), c)
}

// Parent is n's parent; the root's parent is the root.
func (n Name) Parent() Name {
	if len(n) == 0 {
		return n
	}
	return n[:len(n)-1]
}

// Base is n's last component, "" for the root.
func (n Name) Base() string {
	if len(n) == 0 {
		return ""
	}
	return n[len(n)-1]
}

// Cgroupfs is n as the cgroupfs driver names it: a path from the root,
// "/kubepods/burstable/pod<uid>".
func (n Name) Cgroupfs() string {
	return "/" + strings.Join(n, "/")
}

// SystemdSlice is the slice systemd names n with: the components joined
// with "-", each with its "-" escaped as "_" (kubepods-burstable-pod<uid
// with _>.slice); the root is "-.slice".
func (n Name) SystemdSlice() string {
	if len(n) == 0 {
		return "-" + systemdSuffix
	}
	parts := make([]string, len(n))
	for i, c := range n {
		parts[i] = strings.ReplaceAll(c, "-", "_")
	}
	return strings.Join(parts, "-") + systemdSuffix
}

// Systemd is n as the systemd driver names it: the path of its slice in
// the hierarchy, each ancestor a slice of its own
// ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice").
func (n Name) Systemd() string {
	if len(n) == 0 {
		return "/"
	}
	var b strings.Builder
	for i := range n {
		b.WriteString("/")
		b.WriteString(n[:i+1].SystemdSlice())
	}
	return b.String()
}

// ParseCgroupfs is the Name of a cgroupfs path; "" and "/" are the root.
func ParseCgroupfs(p string) Name {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return Name{}
	}
	return Name(strings.Split(p, "/"))
}

// ParseSystemd is the Name of a systemd slice ("a-b.slice") or of the path
// of one ("/a.slice/a-b.slice"); "/" and "-.slice" are the root. Each
// component's "_" is read back as "-".
func ParseSystemd(s string) (Name, error) {
	if s == "" || s == "/" {
		return Name{}, nil
	}
	slice := path.Base(s)
	if !strings.HasSuffix(slice, systemdSuffix) {
		return nil, fmt.Errorf("%q is not a systemd slice: it must end in .slice", s)
	}
	base := strings.TrimSuffix(slice, systemdSuffix)
	if base == "-" {
		return Name{}, nil
	}
	parts := strings.Split(base, "-")
	n := make(Name, len(parts))
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%q is not a valid systemd slice name", s)
		}
		n[i] = strings.ReplaceAll(p, "_", "-")
	}
	if strings.Contains(s, "/") && path.Clean("/"+s) != n.Systemd() {
		return nil, fmt.Errorf("%q is not the path of slice %s (%s)", s, slice, n.Systemd())
	}
	return n, nil
}

// Driver names cgroups the way the runtime's cgroup driver does.
type Driver string

// The drivers.
const (
	Cgroupfs Driver = v1alpha1.CgroupDriverCgroupfs
	Systemd  Driver = v1alpha1.CgroupDriverSystemd
)

// Name is n as the driver names it: what a sandbox's CgroupParent carries.
func (d Driver) Name(n Name) string {
	if d == Systemd {
		return n.Systemd()
	}
	return n.Cgroupfs()
}

// Parse reads a cgroup the driver names (cgroupRoot, the reserved cgroups).
func (d Driver) Parse(s string) (Name, error) {
	if d == Systemd {
		return ParseSystemd(s)
	}
	return ParseCgroupfs(s), nil
}

// ChildName is the Name of the child that a directory called dir holds in
// the hierarchy under parent, as the driver makes it; ok is false for a
// directory the driver would not make there.
func (d Driver) ChildName(parent Name, dir string) (Name, bool) {
	if d != Systemd {
		return parent.Child(dir), true
	}
	n, err := ParseSystemd(dir)
	if err != nil || len(n) != len(parent)+1 || n.Parent().Cgroupfs() != parent.Cgroupfs() {
		return nil, false
	}
	return n, true
}
