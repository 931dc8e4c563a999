package utils

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// NodeMountOptions make each node of a cluster a host of its own for what
// an install writes: the node's processes (its agent, its containerd, and
// whatever runs in NodeMounts.Command) see a mount namespace of the node
// in which Paths and CgroupRoots are the node's own directories, while
// the rest of the file system is the machine's.
type NodeMountOptions struct {
	// Paths are absolute directories (/etc/nodelet, /var/lib/nodelet, ...)
	// that each node sees as an empty directory of its own, bind-mounted
	// over the machine's (made empty on the machine when missing, and
	// removed again by Stop).
	Paths []string
	// CgroupRoots are cgroup paths (/nodelet) that each node sees as a
	// subtree of its own, in every hierarchy mounted under /sys/fs/cgroup:
	// the node's <root> is the machine's <E2ECgroupParent>/<node>/<root>,
	// so agents of two nodes that remove the cgroups they do not know never
	// see each other's.
	CgroupRoots []string
}

// NodeMounts is one node's mount namespace (StartNodeMounts): its root
// and the machine's mounts, with each of the options' paths a directory
// of its own under Dir. Its mounts propagate to the namespaces made from
// it (Bidirectional mounts of its pods work) and never to the machine's.
type NodeMounts struct {
	// Dir holds the node's directories: the node's /etc/nodelet is
	// Dir/root/etc/nodelet on the machine (HostPath).
	Dir string
	// NSPath is the namespace's file, for nsenter --mount: that of a
	// process that holds it (a file bind-mounted from the namespace would
	// not be seen from the namespaces made after it).
	NSPath string
	// NetNS is the node's network namespace (ip netns name), entered with
	// it by Command; "" for none.
	NetNS string
	// Cgroup is the machine's cgroup under which the node's CgroupRoots
	// live (<E2ECgroupParent>/<base of Dir>).
	Cgroup string

	opts   NodeMountOptions
	holder *daemon
	// made are the machine's directories made as mount points, removed
	// by Stop when empty, deepest first.
	made []string
}

// nodeMountStartTimeout bounds making a node's mount namespace.
const nodeMountStartTimeout = 30 * time.Second

// StartNodeMounts makes the mount namespace of one node named name, whose
// processes run in the network namespace netNS ("" for the machine's).
// On error what was made is undone.
func StartNodeMounts(name, netNS string, opts NodeMountOptions) (_ *NodeMounts, err error) {
	if err := ensureDeps(context.Background(), "unshare", "nsenter", "mount"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodelet-host-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating the directory of host %s: %w", name, err)
	}
	m := &NodeMounts{Dir: dir, NetNS: netNS, opts: opts, Cgroup: E2ECgroupParent + "/" + filepath.Base(dir)}
	defer func() {
		if err != nil {
			err = errors.Join(err, m.Stop())
		}
	}()
	script, err := m.prepare()
	if err != nil {
		return m, fmt.Errorf("preparing the mounts of host %s: %w", name, err)
	}
	// A process holds the namespace: it says it is ready with a file,
	// then sleeps until Stop (or the test's end: Pdeathsig) kills it.
	ready := filepath.Join(dir, "ready")
	logPath := filepath.Join(dir, "setup.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return m, fmt.Errorf("creating %s: %w", logPath, err)
	}
	defer logFile.Close()
	script += "touch " + shellQuote(ready) + "\nexec sleep infinity\n"
	argv := []string{"unshare", "--mount", "--propagation", "unchanged", "--", "sh", "-ec", script}
	if netNS != "" {
		// nsenter and unshare exec the rest: the pid stays the holder's.
		argv = append([]string{"nsenter", "--net=" + NetNSPath(netNS), "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if m.holder, err = startLocked(cmd); err != nil {
		return m, fmt.Errorf("making the mount namespace of host %s: %w", name, err)
	}
	deadline := time.Now().Add(nodeMountStartTimeout)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case <-m.holder.done:
			return m, fmt.Errorf("making the mount namespace of host %s: %w: %s", name, m.holder.err, TailLines(logPath, 20))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("making the mount namespace of host %s: not ready after %s: %s", name, nodeMountStartTimeout, TailLines(logPath, 20))
		}
	}
	m.NSPath = fmt.Sprintf("/proc/%d/ns/mnt", m.holder.pid)
	return m, nil
}

// HostPath is where the node's path p (one of the options' Paths or below)
// is on the machine; p itself when it is not the node's own.
func (m *NodeMounts) HostPath(p string) string {
	for _, own := range m.opts.Paths {
		if p == own || strings.HasPrefix(p, own+"/") {
			return filepath.Join(m.Dir, "root", p)
		}
	}
	return p
}

// NsenterArgs are nsenter's arguments that enter the node's namespaces,
// through its holder's files in /proc, which every mount namespace sees.
func (m *NodeMounts) NsenterArgs() []string {
	args := []string{"--mount=" + m.NSPath}
	if m.NetNS != "" {
		args = append(args, "--net="+filepath.Join(filepath.Dir(m.NSPath), "net"))
	}
	return args
}

// Command returns the command that runs args in the node's namespaces,
// in directory wd ("/" when empty).
func (m *NodeMounts) Command(wd string, args ...string) *exec.Cmd {
	if wd == "" {
		wd = "/"
	}
	return exec.Command("nsenter", append(append(m.NsenterArgs(), "--wdns="+wd, "--"), args...)...)
}

// prepare makes the node's directories and the machine's mount points
// and returns the script that, in the new namespace, keeps the machine's
// mounts visible (slave), mounts the node's directories over the
// machine's and makes everything shared within the node.
func (m *NodeMounts) prepare() (string, error) {
	var script strings.Builder
	script.WriteString("mount --make-rslave /\n")
	paths := slices.Clone(m.opts.Paths)
	slices.Sort(paths)
	for _, p := range paths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return "", fmt.Errorf("path %q is not a clean absolute path below /", p)
		}
		own := filepath.Join(m.Dir, "root", p)
		if err := os.MkdirAll(own, 0o755); err != nil {
			return "", fmt.Errorf("creating %s: %w", own, err)
		}
		if err := m.mkdirAll(p); err != nil {
			return "", err
		}
		fmt.Fprintf(&script, "mount --bind %s %s\n", shellQuote(own), shellQuote(p))
	}
	if len(m.opts.CgroupRoots) > 0 {
		hierarchies, err := cgroupHierarchies()
		if err != nil {
			return "", err
		}
		for _, h := range hierarchies {
			for _, root := range m.opts.CgroupRoots {
				own := filepath.Join(h, m.Cgroup, root)
				if err := mkdirCgroup(h, filepath.Join(m.Cgroup, root)); err != nil {
					return "", err
				}
				target := filepath.Join(h, root)
				if err := m.mkdirAll(target); err != nil {
					return "", err
				}
				fmt.Fprintf(&script, "mount --bind %s %s\n", shellQuote(own), shellQuote(target))
			}
		}
	}
	script.WriteString("mount --make-rshared /\n")
	return script.String(), nil
}

// mkdirAll makes dir on the machine and remembers each directory it made.
func (m *NodeMounts) mkdirAll(dir string) error {
	var missing []string
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating mount point %s: %w", missing[i], err)
		}
		m.made = append(m.made, missing[i])
	}
	return nil
}

// cgroupHierarchies lists the cgroup file systems mounted directly under
// /sys/fs/cgroup (each v1 controller, and the unified one), or
// /sys/fs/cgroup alone on a cgroup v2 machine.
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		if fs := fields[sep+1]; fs != "cgroup" && fs != "cgroup2" {
			continue
		}
		if mp := fields[4]; mp == "/sys/fs/cgroup" || filepath.Dir(mp) == "/sys/fs/cgroup" {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted under /sys/fs/cgroup")
	}
	return out, nil
}

// mkdirCgroup makes cgroup (and its parents) in hierarchy h; in a cgroup
// v1 cpuset hierarchy each new cgroup gets its parent's CPUs and memory
// nodes, without which no process may join it or its children.
func mkdirCgroup(h, cgroup string) error {
	dir := h
	for _, part := range strings.Split(strings.Trim(cgroup, "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil {
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			val, err := os.ReadFile(filepath.Join(parent, file))
			if err != nil {
				continue // not a cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, file), val, 0o644); err != nil {
				return fmt.Errorf("setting %s of cgroup %s: %w", file, dir, err)
			}
		}
	}
	return nil
}

// Stop ends the namespace's holder (the namespace and its mounts go once
// no other process runs in it: stop the node's processes first), kills what still runs in
// the node's cgroups and removes them, removes the mount points it made
// on the machine when they are empty, and the node's directories. Safe to
// call twice.
func (m *NodeMounts) Stop() error {
	var errs []error
	if m.holder != nil {
		select {
		case <-m.holder.done: // killed with the node's network already
		default:
			_ = syscall.Kill(m.holder.pid, syscall.SIGKILL)
			<-m.holder.done
		}
		m.holder = nil
	}
	m.NSPath = ""
	if len(m.opts.CgroupRoots) > 0 {
		errs = append(errs, RemoveCgroupTree(m.Cgroup))
	}
	for i := len(m.made) - 1; i >= 0; i-- {
		// Only when empty: something else may have put files there since.
		if err := os.Remove(m.made[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing mount point %s: %w", m.made[i], err))
		}
	}
	m.made = nil
	if m.Dir != "" {
		if err := unmountUnder(m.Dir); err != nil {
			errs = append(errs, err)
		} else if err := os.RemoveAll(m.Dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", m.Dir, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing the mounts of a host: %w", err)
	}
	return nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
