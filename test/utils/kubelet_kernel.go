package utils

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// kubeletKernelTunables are the sysctls the kubelet sets at start (unless
// protectKernelDefaults, which refuses to start when they differ), with the
// values it wants. Set on a shared test machine they would make it panic on
// the next oops.
var kubeletKernelTunables = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// cadvisorContainerdDir is where the cAdvisor inside the kubelet looks for
// containerd's socket (containerd.sock), whatever the kubelet's CRI
// endpoint is.
const cadvisorContainerdDir = "/run/containerd"

// BindMount is a directory bind-mounted over another in the kubelet's own
// mount namespace only.
type BindMount struct{ Source, Target string }

// IsolatedKubeletCommand returns the command prefix that runs a kubelet so
// that it cannot change this machine's kernel settings: `unshare` into a
// mount namespace of its own (keeping propagation, so what it mounts under
// dir reaches containerd) and a wrapper script, written to dir, that
// bind-mounts a plain file holding the wanted value over each of
// kubeletKernelTunables, and each of binds, before exec'ing its arguments.
// dir is made a shared mount of its own first; unmountUnder(dir) undoes it.
//
// A bind's target directory is made when missing (on the machine: an empty
// directory stays behind), and the mount that holds it is made private in
// the kubelet's namespace first, so that the bind reaches no other
// namespace even where / is shared (systemd's).
func IsolatedKubeletCommand(dir string, binds ...BindMount) ([]string, error) {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("bind-mounting the kubelet directory: %w", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return nil, fmt.Errorf("making the kubelet directory a shared mount: %w", err)
	}
	names := make([]string, 0, len(kubeletKernelTunables))
	for name := range kubeletKernelTunables {
		names = append(names, name)
	}
	sort.Strings(names)
	var script strings.Builder
	script.WriteString("#!/bin/sh\nset -e\nmount --make-rprivate /proc\n")
	for _, name := range names {
		f := filepath.Join(dir, "sysctl", strings.ReplaceAll(name, "/", "."))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, fmt.Errorf("writing the kubelet's kernel settings: %w", err)
		}
		if err := os.WriteFile(f, []byte(kubeletKernelTunables[name]+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("writing the kubelet's kernel settings: %w", err)
		}
		fmt.Fprintf(&script, "mount --bind %s /proc/sys/%s\n", f, name)
	}
	for _, b := range binds {
		t := shellQuote(b.Target)
		fmt.Fprintf(&script, "mkdir -p %s\nmount --make-private \"$(findmnt -n -o TARGET --target %s)\"\nmount --bind %s %s\n",
			t, t, shellQuote(b.Source), t)
	}
	script.WriteString("exec \"$@\"\n")
	path := filepath.Join(dir, "kubelet-ns.sh")
	if err := os.WriteFile(path, []byte(script.String()), 0o755); err != nil {
		return nil, fmt.Errorf("writing the kubelet wrapper: %w", err)
	}
	return []string{"unshare", "--mount", "--propagation", "unchanged", "--", path}, nil
}
