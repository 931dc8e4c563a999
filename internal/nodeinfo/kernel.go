package nodeinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// KernelDefault is a kernel setting the kubelet expects, by its sysctl
// name.
type KernelDefault struct {
	Name  string
	Value int
}

// KernelDefaults are the settings the kubelet checks with
// protectKernelDefaults (and sets without it): memory overcommit always
// allowed, no panic on OOM, a reboot 10 s after a panic, a panic on an
// oops, and room for the keys of many containers.
var KernelDefaults = []KernelDefault{
	{Name: "vm.overcommit_memory", Value: 1},
	{Name: "vm.panic_on_oom", Value: 0},
	{Name: "kernel.panic", Value: 10},
	{Name: "kernel.panic_on_oops", Value: 1},
	{Name: "kernel.keys.root_maxkeys", Value: 1000000},
	{Name: "kernel.keys.root_maxbytes", Value: 25000000},
}

// CheckKernelDefaults reads each of KernelDefaults under procSys
// (/proc/sys) and returns an error naming every one that differs or cannot
// be read, as the kubelet refuses to start with protectKernelDefaults.
func CheckKernelDefaults(procSys string) error {
	var bad []string
	for _, d := range KernelDefaults {
		path := filepath.Join(procSys, strings.ReplaceAll(d.Name, ".", "/"))
		data, err := os.ReadFile(path)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s cannot be read (%v), want %d", d.Name, err, d.Value))
			continue
		}
		got, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s is %q, want %d", d.Name, strings.TrimSpace(string(data)), d.Value))
			continue
		}
		if got != d.Value {
			bad = append(bad, fmt.Sprintf("%s is %d, want %d", d.Name, got, d.Value))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("protectKernelDefaults: the kernel's settings are not the kubelet's defaults: %s", strings.Join(bad, "; "))
	}
	return nil
}
