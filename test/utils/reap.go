package utils

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// HarnessDirPrefixes start the names of the temporary directories the
// harness and envtest make; nothing else is ever removed as a leftover.
var HarnessDirPrefixes = []string{"nodelet-", "k8s_test_framework_"}

// bridgePrefix starts the name of every bridge the harness's containerds
// make (slotBridge).
const bridgePrefix = "nlbr"

// slotBridge is the bridge of the containerd instance holding slot n.
func slotBridge(n int) string { return bridgePrefix + strconv.Itoa(n) }

// Leftovers counts what ReapLeftovers removed.
type Leftovers struct {
	Instances, Dirs, Cgroups, Bridges, Sockets int
}

// ReapLeftovers removes what test and benchmark runs that were killed left
// on the machine: their containerds with their shims and containers, the
// agents, API servers and etcds under their directories, the mounts in and
// the directories themselves, the pod cgroups under E2ECgroupParent, the
// bridges, and the sockets of killed shims. It refuses while a test binary
// or a local cluster runs, as all of these may be theirs.
func ReapLeftovers(logf func(format string, args ...any)) (Leftovers, error) {
	var out Leftovers
	procs, err := listProcs()
	if err != nil {
		return out, err
	}
	if p, ok := liveRun(procs); ok {
		return out, fmt.Errorf("a run is in progress (pid %d, %s): stop it first", p.pid, filepath.Base(p.args[0]))
	}
	// Each containerd instance holds its slot's lock for its life: a free
	// slot that names a directory is a dead instance's.
	locks, _ := filepath.Glob(filepath.Join(slotDir, "*.lock"))
	var errs []error
	for _, path := range locks {
		dir, held, err := reapSlot(path, logf)
		switch {
		case err != nil:
			errs = append(errs, err)
		case held:
			return out, fmt.Errorf("containerd instance %s is running (slot lock %s held): stop its run first", dir, path)
		case dir != "":
			out.Instances++
		}
	}
	dirs, err := harnessDirs(os.TempDir())
	if err != nil {
		return out, err
	}
	if err := KillProcessesUnder(dirs...); err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		if err := UnmountUnder(d); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", d, err))
			continue
		}
		logf("removed %s", d)
		out.Dirs++
	}
	for _, cg := range e2eCgroups() {
		if err := RemoveCgroupTree(cg); err != nil {
			errs = append(errs, err)
			continue
		}
		logf("removed cgroup %s", cg)
		out.Cgroups++
	}
	out.Sockets, err = removeDeadSockets(shimSocketDir)
	if err != nil {
		errs = append(errs, err)
	}
	ifaces, _ := net.Interfaces()
	for _, iface := range ifaces {
		if !strings.HasPrefix(iface.Name, bridgePrefix) {
			continue
		}
		if err := deleteBridge(iface.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		logf("removed bridge %s", iface.Name)
		out.Bridges++
	}
	return out, errors.Join(errs...)
}

// liveRun returns a process of a run in progress: a Go test binary (the
// e2e suite, a benchmark), ginkgo, or the local cluster of make run.
func liveRun(procs []procInfo) (procInfo, bool) {
	for _, p := range procs {
		if len(p.args) == 0 || p.pid == os.Getpid() || p.state == 'Z' {
			continue
		}
		base := filepath.Base(p.args[0])
		if strings.HasSuffix(base, ".test") || base == "ginkgo" || base == "nodelet-localup" {
			return p, true
		}
	}
	return procInfo{}, false
}

// reapSlot tears down the instance a free slot names and clears the slot;
// held reports that a live instance holds it (dir is then its directory).
func reapSlot(path string, logf func(format string, args ...any)) (dir string, held bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", false, fmt.Errorf("opening slot lock %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return "", false, fmt.Errorf("reading slot lock %s: %w", path, err)
	}
	dir = strings.TrimSpace(string(data))
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return dir, true, nil
	}
	if dir == "" {
		return "", false, nil
	}
	_, statErr := os.Stat(dir)
	bridge := bridgePrefix + strings.TrimSuffix(filepath.Base(path), ".lock")
	if err := teardownInstance(dir, bridge); err != nil {
		return "", false, fmt.Errorf("tearing down containerd instance %s: %w", dir, err)
	}
	if err := f.Truncate(0); err != nil {
		return "", false, fmt.Errorf("clearing slot lock %s: %w", path, err)
	}
	if statErr != nil {
		// Removed before, by hand or by a teardown that could not
		// clear the slot.
		return "", false, nil
	}
	logf("tore down containerd instance %s", dir)
	return dir, false, nil
}

// harnessDirs lists the directories in tmp that the harness and envtest
// make.
func harnessDirs(tmp string) ([]string, error) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", tmp, err)
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		for _, p := range HarnessDirPrefixes {
			if strings.HasPrefix(e.Name(), p) {
				dirs = append(dirs, filepath.Join(tmp, e.Name()))
				break
			}
		}
	}
	return dirs, nil
}

// e2eCgroups lists the cgroups under E2ECgroupParent, in any hierarchy: one
// per agent the harness started.
func e2eCgroups() []string {
	seen := map[string]bool{}
	var out []string
	for _, top := range CgroupDirs(E2ECgroupParent) {
		entries, _ := os.ReadDir(top)
		for _, e := range entries {
			cg := E2ECgroupParent + "/" + e.Name()
			if e.IsDir() && !seen[cg] {
				seen[cg] = true
				out = append(out, cg)
			}
		}
	}
	return out
}

// removeDeadSockets removes the sockets in dir that nothing listens on: a
// shim removes its socket when it exits, but not when it is killed.
func removeDeadSockets(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", dir, err)
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		conn, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			conn.Close()
			continue
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			continue
		}
		if err := os.Remove(path); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
