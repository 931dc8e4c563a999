package utils

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// slotDir holds one lock file per pod subnet 10.250.N.0/24. A containerd
// instance holds the flock of its N for its whole life, so parallel test
// processes never share a bridge or subnet; the file names the instance's
// directory so that the next owner can clean up after a test process that
// died without stopping its containerd.
const slotDir = "/run/nodelet/containerd-slots"

// maxSlot is the number of pod subnets (and so of containerds that can run
// at once on one machine).
const maxSlot = 250

// instanceDirPrefix starts the name of every containerd directory; teardown
// refuses to remove a directory without it.
const instanceDirPrefix = "nodelet-containerd-"

type slot struct {
	n int
	f *os.File
}

// acquireSlots takes count free slots N, N+1, … that follow each other,
// from an N that count divides, at random (the /24s of one subnet; any
// free N for one), cleaning up whatever a dead previous holder of each
// left and recording dir as the new holder.
func acquireSlots(dir string, count int) ([]*slot, error) {
	if err := os.MkdirAll(slotDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", slotDir, err)
	}
	blocks := maxSlot / count // slot 0 does not exist: blocks start at count
	start := rand.IntN(blocks)
	for i := range blocks {
		first := ((start+i)%blocks + 1) * count
		if first+count-1 > maxSlot {
			continue
		}
		var held []*slot
		for n := first; n < first+count; n++ {
			s, err := takeSlot(dir, n)
			if err != nil {
				releaseAll(held)
				return nil, err
			}
			if s == nil {
				break
			}
			held = append(held, s)
		}
		if len(held) == count {
			return held, nil
		}
		releaseAll(held)
	}
	return nil, fmt.Errorf("no free pod subnet of %d slots: the slots in %s are held", count, slotDir)
}

// tryLockSlot opens the lock file at path and takes its lock without
// waiting: nil and no error when another process holds it.
func tryLockSlot(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening slot lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, nil //nolint:nilerr // held by another process
	}
	return f, nil
}

// releaseAll releases every slot of slots.
func releaseAll(slots []*slot) {
	for _, s := range slots {
		s.release()
	}
}

// takeSlot takes slot n when it is free, cleaning up whatever a dead
// previous holder left and recording dir as the new holder; nil when
// another holds it or its subnet is in use.
func takeSlot(dir string, n int) (*slot, error) {
	f, err := tryLockSlot(filepath.Join(slotDir, fmt.Sprintf("%d.lock", n)))
	if f == nil || err != nil {
		return nil, err
	}
	// Free: any previous holder is gone. Clean up after it.
	bridge := slotBridge(n)
	prev, _ := io.ReadAll(f)
	if p := strings.TrimSpace(string(prev)); p != "" && p != dir {
		_ = teardownInstance(p, bridge)
	} else {
		_ = deleteBridge(bridge)
	}
	if subnetInUse(n, bridge) {
		f.Close()
		return nil, nil
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("recording slot %d: %w", n, err)
	}
	if _, err := f.WriteAt([]byte(dir+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("recording slot %d: %w", n, err)
	}
	return &slot{n: n, f: f}, nil
}

func (s *slot) release() {
	_ = s.f.Truncate(0)
	_ = s.f.Close() // closing drops the flock
}

// subnetInUse reports whether an interface other than our bridge already has
// an address in 10.250.n.0/24 (a network this harness did not make).
func subnetInUse(n int, bridge string) bool {
	_, subnet, _ := net.ParseCIDR(fmt.Sprintf("%s.%d.0/24", subnetPrefix, n))
	ifaces, err := net.Interfaces()
	if err != nil {
		return false
	}
	for _, iface := range ifaces {
		if iface.Name == bridge {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && subnet.Contains(ipn.IP) {
				return true
			}
		}
	}
	return false
}

// teardownInstance removes everything of the containerd instance in dir:
// its daemon and shims and the processes they run, mounts under dir, the
// bridge, and dir itself.
func teardownInstance(dir, bridge string) error {
	if !filepath.IsAbs(dir) || !strings.HasPrefix(filepath.Base(dir), instanceDirPrefix) {
		return fmt.Errorf("refusing to tear down %q: not a containerd test directory", dir)
	}
	var errs []error
	if err := killInstanceProcesses(filepath.Join(dir, "containerd.sock")); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if bridge != "" {
		if err := deleteBridge(bridge); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
	}
	return errors.Join(errs...)
}

type procInfo struct {
	pid, ppid int
	state     byte
	args      []string
}

// listProcs reads every process's parent, state and command line.
func listProcs() ([]procInfo, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var procs []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		// "pid (comm) S ppid …"; comm may hold spaces and parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		procs = append(procs, procInfo{pid: pid, ppid: ppid, state: fields[0][0], args: args})
	}
	return procs, nil
}

// belongsTo reports whether p is the containerd or a shim of the instance
// listening on socket.
func (p procInfo) belongsTo(socket string) bool {
	if len(p.args) == 0 {
		return false
	}
	base := filepath.Base(p.args[0])
	switch {
	case base == "containerd":
		return slices.Contains(p.args, socket)
	case strings.HasPrefix(base, "containerd-shim"):
		for i, a := range p.args {
			if (a == "-address" || a == "--address") && i+1 < len(p.args) && p.args[i+1] == socket {
				return true
			}
		}
	}
	return false
}

// shimSocketDir is where containerd 1.6 shims put their sockets, whatever
// the daemon's --state: it is fixed at build time.
const shimSocketDir = "/run/containerd/s"

// shimSocket returns the socket path of a containerd 1.6 shim: the sha256 of
// <containerd address>/<namespace>/<id>, hex, under shimSocketDir.
func (p procInfo) shimSocket(address string) string {
	var ns, id string
	for i := 0; i+1 < len(p.args); i++ {
		switch p.args[i] {
		case "-namespace", "--namespace":
			ns = p.args[i+1]
		case "-id", "--id":
			id = p.args[i+1]
		}
	}
	if ns == "" || id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(filepath.Join(address, ns, id)))
	return filepath.Join(shimSocketDir, hex.EncodeToString(sum[:]))
}

var containerIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// killInstanceProcesses SIGKILLs the containerd and the shims of the
// instance on socket and every process under the shims (the containers),
// waits for them to go, and removes the cgroups of those containers.
func killInstanceProcesses(socket string) error {
	procs, err := listProcs()
	if err != nil {
		return err
	}
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var targets, shims []int
	var shimSockets []string
	for _, p := range procs {
		if p.belongsTo(socket) && p.pid != os.Getpid() {
			targets = append(targets, p.pid)
			if filepath.Base(p.args[0]) != "containerd" {
				shims = append(shims, p.pid)
				shimSockets = append(shimSockets, p.shimSocket(socket))
			}
		}
	}
	var cgroups []string
	queue := slices.Clone(shims)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, child := range children[pid] {
			targets = append(targets, child)
			cgroups = append(cgroups, containerCgroups(child)...)
			queue = append(queue, child)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	for _, pid := range targets {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range targets {
		for alive(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d of %s survived SIGKILL", pid, socket)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A shim removes its socket when it exits cleanly, not when killed.
	for _, s := range shimSockets {
		if s != "" {
			_ = os.Remove(s)
		}
	}
	// Deepest first; a cgroup that is not empty is left alone.
	slices.SortFunc(cgroups, func(a, b string) int { return len(b) - len(a) })
	for _, cg := range slices.Compact(cgroups) {
		_ = os.Remove(cg)
	}
	return nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(rest)
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// containerCgroups returns the cgroup directories of pid (cgroup v1 and v2)
// that are named after a container ID, the only ones safe to remove.
func containerCgroups(pid int) []string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !containerIDPattern.MatchString(filepath.Base(parts[2])) {
			continue
		}
		ctrl := parts[1]
		switch {
		case ctrl == "":
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parts[2]))
		case strings.HasPrefix(ctrl, "name="):
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(ctrl, "name="), parts[2]))
		default:
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", ctrl, parts[2]))
		}
	}
	return dirs
}

// unmountUnder lazily unmounts every mount at or below dir, innermost first.
func unmountUnder(dir string) error {
	for range 5 {
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		for i := len(mounts) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounts[i], unix.MNT_DETACH)
		}
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("mounts left under %s: %v", dir, mounts)
	}
	return nil
}

// mountsUnder lists the mount points at or below dir in mount order.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	return mounts, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// deleteBridge removes the named link if it exists.
func deleteBridge(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil {
		return fmt.Errorf("deleting bridge %s: %w: %s", name, err, out)
	}
	return nil
}
