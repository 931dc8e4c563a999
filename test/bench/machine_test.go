package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// controlPlaneCommands are the command names of the API server and etcd the
// harness starts as children of the benchmark process.
var controlPlaneCommands = []string{"kube-apiserver", "etcd"}

// cpuSplit is where the machine's CPU went: every process (machine), the
// harness's API server and etcd (controlPlane), and the benchmark process
// itself (bench: its Creates and watches, and the floor's CRI calls). An
// agent's own CPU is read from its process (processCPU).
type cpuSplit struct {
	machine, controlPlane, bench time.Duration
}

// sub is the CPU spent between an earlier reading and s.
func (s cpuSplit) sub(earlier cpuSplit) cpuSplit {
	return cpuSplit{
		machine:      s.machine - earlier.machine,
		controlPlane: s.controlPlane - earlier.controlPlane,
		bench:        s.bench - earlier.bench,
	}
}

// rest is the machine's CPU that neither the control plane, the
// benchmark nor the agent (which used agent) spent: the container
// runtime's daemons, shims and runc, the kernel's own work, and whatever
// else the machine ran.
func (s cpuSplit) rest(agent time.Duration) time.Duration {
	return s.machine - s.controlPlane - s.bench - agent
}

// readCPUSplit reads the counters of cpuSplit; a counter it cannot read
// is an error, so that a table never shows a made-up split.
func readCPUSplit() (cpuSplit, error) {
	var s cpuSplit
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, fmt.Errorf("reading the machine's CPU time: %w", err)
	}
	if s.machine, err = parseMachineBusy(string(stat)); err != nil {
		return s, err
	}
	if s.controlPlane, err = childrenCPU(os.Getpid(), controlPlaneCommands); err != nil {
		return s, err
	}
	if s.bench, err = processCPU(os.Getpid()); err != nil {
		return s, err
	}
	return s, nil
}

// parseMachineBusy reads the busy time of all CPUs from the text of
// /proc/stat: user, nice, system, irq, softirq and steal (guest time is
// already in user); idle and iowait are not busy.
func parseMachineBusy(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("no cpu line in /proc/stat: %q", line)
	}
	var ticks int64
	// cpu user nice system idle iowait irq softirq steal ...
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading /proc/stat field %d %q: %w", i, fields[i], err)
		}
		ticks += v
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / clkTck, nil
}

// childrenCPU sums the CPU time (processCPU) of parent's child processes
// whose command name is one of commands. A process that exits while it is
// read is skipped.
func childrenCPU(parent int, commands []string) (time.Duration, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	var total time.Duration
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
				continue
			}
			return 0, fmt.Errorf("reading %s: %w", path, err)
		}
		comm, ppid, ok := parseStatParent(string(data))
		if !ok || ppid != parent || !slices.Contains(commands, comm) {
			continue
		}
		cpu, err := parseStatCPU(string(data))
		if err != nil {
			return 0, fmt.Errorf("reading %s: %w", path, err)
		}
		total += cpu
	}
	return total, nil
}

// parseStatParent reads the command name and the parent's PID from the
// text of /proc/<pid>/stat.
func parseStatParent(stat string) (comm string, ppid int, ok bool) {
	open := strings.IndexByte(stat, '(')
	end := strings.LastIndexByte(stat, ')')
	if open < 0 || end < open || end+2 > len(stat) {
		return "", 0, false
	}
	fields := strings.Fields(stat[end+2:])
	// state ppid ...
	if len(fields) < 2 {
		return "", 0, false
	}
	p, err := strconv.Atoi(fields[1])
	if err != nil {
		return "", 0, false
	}
	return stat[open+1 : end], p, true
}
