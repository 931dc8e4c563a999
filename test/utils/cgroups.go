package utils

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// E2ECgroupParent holds the cgroupRoot of every agent the harness starts,
// one child per agent, so that agents sharing the machine never share
// pod cgroups, and none touches the machine's own.
const E2ECgroupParent = "/nodelet-e2e"

// cgroupRemoveTimeout bounds removeCgroupDir.
const cgroupRemoveTimeout = 10 * time.Second

// CgroupDirs are the directories of the cgroup (a cgroupfs path such as
// /nodelet-e2e/x/kubepods) in every hierarchy mounted under /sys/fs/cgroup
// (each cgroup v1 controller, and the unified one) where it exists.
func CgroupDirs(cgroup string) []string {
	mounts, _ := filepath.Glob("/sys/fs/cgroup/*")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		mounts = []string{"/sys/fs/cgroup"} // cgroup v2 alone
	}
	var dirs []string
	for _, m := range mounts {
		d := filepath.Join(m, cgroup)
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// CgroupFile reads a cgroup's file, e.g. ("cpu", "/x/kubepods", "cpu.shares")
// on cgroup v1, trimmed.
func CgroupFile(controller, cgroup, file string) (string, error) {
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, cgroup, file))
	return strings.TrimSpace(string(data)), err
}

// RemoveCgroupTree kills what runs in the cgroup and below (what an agent
// left, which is its own) and removes the cgroups, deepest first, in every
// hierarchy.
func RemoveCgroupTree(cgroup string) error {
	if strings.Trim(cgroup, "/") == "" || !strings.HasPrefix(cgroup, E2ECgroupParent+"/") {
		return fmt.Errorf("refusing to remove cgroup %q outside %s", cgroup, E2ECgroupParent)
	}
	var errs []error
	for _, top := range CgroupDirs(cgroup) {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		for _, d := range dirs {
			errs = append(errs, removeCgroupDir(d))
		}
	}
	return errors.Join(errs...)
}

// removeCgroupDir kills what runs in cgroup dir and removes it, trying
// for up to cgroupRemoveTimeout: killed processes take a while to exit
// on a loaded machine.
func removeCgroupDir(dir string) error {
	var err error
	for deadline := time.Now().Add(cgroupRemoveTimeout); time.Now().Before(deadline); {
		if data, rerr := os.ReadFile(filepath.Join(dir, "cgroup.procs")); rerr == nil {
			for _, f := range strings.Fields(string(data)) {
				if pid, perr := strconv.Atoi(f); perr == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", dir, err)
}
