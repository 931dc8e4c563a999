package nodeinfo

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Eviction signals nodeinfo evaluates. imagefs signals are accepted in the
// configuration but not evaluated: nodelet does not ask the runtime where
// its image filesystem lives.
const (
	SignalMemoryAvailable   = "memory.available"
	SignalNodeFSAvailable   = "nodefs.available"
	SignalNodeFSInodesFree  = "nodefs.inodesFree"
	SignalPIDAvailable      = "pid.available"
	hugePagesResourcePrefix = corev1.ResourceHugePagesPrefix
)

// Threshold is one hard eviction threshold: an absolute quantity or a
// percentage of the signal's capacity.
type Threshold struct {
	Quantity   *resource.Quantity
	Percentage float64
}

// Value is the threshold in the signal's unit for a capacity of capacity.
func (t Threshold) Value(capacity int64) int64 {
	if t.Quantity != nil {
		return t.Quantity.Value()
	}
	return int64(float64(capacity) * t.Percentage / 100)
}

// Thresholds are hard eviction thresholds by signal name.
type Thresholds map[string]Threshold

// ParseThresholds parses evictionHard ("100Mi", "10%").
func ParseThresholds(m map[string]string) (Thresholds, error) {
	out := make(Thresholds, len(m))
	for k, v := range m {
		if pct, ok := strings.CutSuffix(v, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			if err != nil || f < 0 || f > 100 {
				return nil, fmt.Errorf("eviction threshold %s=%q is not a percentage between 0%% and 100%%", k, v)
			}
			out[k] = Threshold{Percentage: f}
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("parsing eviction threshold %s=%q: %w", k, v, err)
		}
		out[k] = Threshold{Quantity: &q}
	}
	return out, nil
}

// ParseResourceList parses a reservation such as systemReserved
// ({"cpu": "500m", "memory": "1Gi"}).
func ParseResourceList(m map[string]string) (corev1.ResourceList, error) {
	out := make(corev1.ResourceList, len(m))
	for k, v := range m {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("parsing reserved %s=%q: %w", k, v, err)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}

// Capacity is the node's capacity: cpu, memory, pods, ephemeral-storage (when
// the root filesystem's size is known) and huge pages of the default size
// (when the kernel supports them).
func Capacity(numCPU int, mem Memory, rootFS Filesystem, maxPods int32) corev1.ResourceList {
	c := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(numCPU), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem.TotalBytes, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	if rootFS.CapacityBytes > 0 {
		c[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(rootFS.CapacityBytes, resource.BinarySI)
	}
	if mem.HugePageSizeBytes > 0 {
		size := resource.NewQuantity(mem.HugePageSizeBytes, resource.BinarySI)
		name := corev1.ResourceName(hugePagesResourcePrefix + size.String())
		c[name] = *resource.NewQuantity(mem.HugePagesTotal*mem.HugePageSizeBytes, resource.BinarySI)
	}
	return c
}

// Allocatable is capacity minus systemReserved, kubeReserved and the hard
// eviction thresholds (memory.available from memory, nodefs.available from
// ephemeral-storage, percentages taken of the capacity), minus huge pages
// from memory, never below zero. Resources without a reservation are
// allocatable whole.
func Allocatable(capacity, systemReserved, kubeReserved corev1.ResourceList, hard Thresholds) corev1.ResourceList {
	reserved := corev1.ResourceList{}
	add := func(name corev1.ResourceName, q resource.Quantity) {
		sum := reserved[name]
		sum.Add(q)
		reserved[name] = sum
	}
	for _, rl := range []corev1.ResourceList{systemReserved, kubeReserved} {
		for name, q := range rl {
			add(name, q)
		}
	}
	for signal, name := range map[string]corev1.ResourceName{
		SignalMemoryAvailable: corev1.ResourceMemory,
		SignalNodeFSAvailable: corev1.ResourceEphemeralStorage,
	} {
		t, ok := hard[signal]
		c, has := capacity[name]
		if !ok || !has {
			continue
		}
		add(name, *resource.NewQuantity(t.Value(c.Value()), resource.BinarySI))
	}
	for name, q := range capacity {
		if strings.HasPrefix(string(name), hugePagesResourcePrefix) {
			add(corev1.ResourceMemory, q)
		}
	}

	out := make(corev1.ResourceList, len(capacity))
	for name, c := range capacity {
		v := c.DeepCopy()
		if r, ok := reserved[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v = *resource.NewQuantity(0, c.Format)
		}
		out[name] = v
	}
	return out
}

// Usage is what the pressure conditions are judged on. A zero total means
// the measure is unknown and never signals pressure.
type Usage struct {
	Memory Memory
	RootFS Filesystem
	// PIDMax is kernel.pid_max; Tasks is the number of processes and threads.
	PIDMax int64
	Tasks  int64
}

// Pressure says which hard eviction thresholds are crossed.
type Pressure struct {
	Memory bool
	Disk   bool
	PID    bool
}

// EvaluatePressure compares usage with the hard thresholds: memory.available
// (MemAvailable), nodefs.available and nodefs.inodesFree (the root
// directory's filesystem) and pid.available (pid_max minus tasks), at
// once and without a transition period: the conditions of a node whose
// eviction manager (internal/eviction) has not looked yet, or does not
// run (the pod controller is off).
func EvaluatePressure(u Usage, hard Thresholds) Pressure {
	below := func(signal string, available, capacity int64) bool {
		t, ok := hard[signal]
		return ok && capacity > 0 && available < t.Value(capacity)
	}
	return Pressure{
		Memory: below(SignalMemoryAvailable, u.Memory.AvailableBytes, u.Memory.TotalBytes),
		Disk: below(SignalNodeFSAvailable, u.RootFS.AvailableBytes, u.RootFS.CapacityBytes) ||
			below(SignalNodeFSInodesFree, u.RootFS.InodesFree, u.RootFS.Inodes),
		PID: below(SignalPIDAvailable, u.PIDMax-u.Tasks, u.PIDMax),
	}
}
