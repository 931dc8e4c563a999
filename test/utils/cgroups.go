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

// CgroupV2 reports whether the host runs cgroup v2 alone.
func CgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// HugetlbController reports whether the hugetlb controller can bound huge
// pages in the hierarchy the host's cgroup version uses: enabled in the
// v2 root, or mounted at /sys/fs/cgroup/hugetlb on v1 (a hybrid host may
// leave it to its v2 hierarchy, where v1 cgroups cannot use it).
func HugetlbController() bool {
	if CgroupV2() {
		data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		return err == nil && slices.Contains(strings.Fields(string(data)), "hugetlb")
	}
	sizes := HugePageSizes()
	if len(sizes) == 0 {
		return false
	}
	_, err := os.Stat("/sys/fs/cgroup/hugetlb/hugetlb." + sizes[0] + ".limit_in_bytes")
	return err == nil
}

// HugePageSizes are the host's huge page sizes as cgroups name them
// ("2MB", "1GB"), from /sys/kernel/mm/hugepages.
func HugePageSizes() []string {
	entries, _ := os.ReadDir("/sys/kernel/mm/hugepages")
	var sizes []string
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(kb, "kB"), 10, 64)
		if err != nil {
			continue
		}
		unit := "KB"
		for _, u := range []string{"MB", "GB", "TB"} {
			if n%1024 != 0 {
				break
			}
			n, unit = n/1024, u
		}
		sizes = append(sizes, strconv.FormatInt(n, 10)+unit)
	}
	return sizes
}

// HugetlbLimit reads the hugetlb limit of the page size (as HugePageSizes
// names it) of a cgroup (a cgroupfs path), from the file of the host's
// cgroup version: hugetlb.<size>.limit_in_bytes on v1, hugetlb.<size>.max
// on v2.
func HugetlbLimit(cgroup, size string) (string, error) {
	if CgroupV2() {
		return CgroupFile("", cgroup, "hugetlb."+size+".max")
	}
	return CgroupFile("hugetlb", cgroup, "hugetlb."+size+".limit_in_bytes")
}
