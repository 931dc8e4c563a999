package utils

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// These helpers clean up after a run whose process was killed before it
// could stop what it started (make run-down): they need only the
// directories the run recorded, not the objects that started them.

// TeardownContainerdDir removes what a containerd started by
// StartContainerd in dir left behind: its daemon, shims and their
// containers, the mounts under dir, the CNI bridge, and dir itself.
func TeardownContainerdDir(dir, bridge string) error {
	return teardownInstance(dir, bridge)
}

// UnmountUnder lazily unmounts every mount at or below dir, innermost
// first, and fails when one is still there.
func UnmountUnder(dir string) error { return unmountUnder(dir) }

// MountsUnder lists the mount points at or below dir.
func MountsUnder(dir string) ([]string, error) { return mountsUnder(dir) }

// Dirs are the directories of the control plane on disk: the harness's
// (CAs, kubeconfigs), the API server's certificates and etcd's data. The
// processes of the API server and etcd name them in their arguments.
func (a *APIServer) Dirs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	dirs := []string{a.Dir}
	if s := a.Env.ControlPlane.APIServer; s != nil && s.CertDir != "" {
		dirs = append(dirs, s.CertDir)
	}
	if e := a.Env.ControlPlane.Etcd; e != nil && e.DataDir != "" {
		dirs = append(dirs, e.DataDir)
	}
	return append(dirs, a.keptCertDirs...)
}

// ProcessesUnder returns the processes, other than this one, with a
// command-line argument that is, or names a path under, one of dirs
// (directly or as the value of a --flag=value).
func ProcessesUnder(dirs ...string) ([]int, error) {
	procs, err := listProcs()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range procs {
		if p.pid != os.Getpid() && p.state != 'Z' && argsUnder(p.args, dirs) {
			pids = append(pids, p.pid)
		}
	}
	return pids, nil
}

func argsUnder(args, dirs []string) bool {
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		for _, d := range dirs {
			d = filepath.Clean(d)
			if d != "/" && filepath.IsAbs(d) && (a == d || strings.HasPrefix(a, d+"/")) {
				return true
			}
		}
	}
	return false
}

// KillProcessesUnder SIGKILLs ProcessesUnder(dirs) and waits up to ten
// seconds for them to be gone.
func KillProcessesUnder(dirs ...string) error {
	pids, err := ProcessesUnder(dirs...)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	var errs []error
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			errs = append(errs, fmt.Errorf("process %d survived SIGKILL", pid))
		}
	}
	return errors.Join(errs...)
}
