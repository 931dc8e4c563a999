package cgroups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ocgroups "github.com/opencontainers/cgroups"
	ocmanager "github.com/opencontainers/cgroups/manager"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
)

// Options configure a Manager.
type Options struct {
	// Driver is the runtime's cgroup driver.
	Driver Driver
	// Root is cgroupRoot, as the driver names it; "" is the root.
	Root string
	// PodPidsLimit bounds each pod's processes when positive.
	PodPidsLimit int64
	// HugePageSizes are the huge page sizes the host's hugetlb controller
	// bounds ("2MB", "1GB"; see HugetlbSizes): each pod's cgroup is
	// bounded by its request of each, 0 when it asks for none. None
	// bounds no huge pages.
	HugePageSizes []string
	// MemoryQoS is the MemoryQoS feature gate and its settings (cgroup v2
	// only).
	MemoryQoS criconfig.MemoryQoS
	// CPUQuota makes the pods' CPU limits a CFS quota.
	CPUQuota criconfig.CPUQuota
	// Allocatable bounds kubepods when set (enforceNodeAllocatable has
	// "pods").
	Allocatable v1.ResourceList
	// Reserved are the cgroups, as the driver names them, bounded by their
	// reservations (system-reserved, kube-reserved). They must exist.
	Reserved map[string]v1.ResourceList
	Log      logr.Logger
}

// Manager makes, bounds, adopts and removes the pod and QoS cgroups. It
// is safe for concurrent use; calls for one pod must not run concurrently
// (the pod workers serialize them).
type Manager struct {
	opts     Options
	kubepods Name
	// settings are what the pods' cgroups take from the node.
	settings PodSettings

	mu sync.Mutex
	// pods are the pods whose cgroup the Manager set: what it set and
	// their QoS summaries for the QoS cgroups.
	pods map[types.UID]podEntry
	// qosPaths holds, by QoS cgroup (kubepods and its children), the
	// directory of each controller, for cgroupfs on cgroup v1: a pod
	// cgroup's are the same with its name appended, without resolving
	// every controller's mount again for each pod.
	pathsMu  sync.Mutex
	qosPaths map[string]map[string]string
	// burstable and kubepodsQoS are what updateQoS last set on the
	// burstable and kubepods cgroups, so that a pod's start or removal
	// that does not change them writes nothing; nil: not set by this
	// Manager yet.
	burstable   *Config
	kubepodsQoS *Config
}

type podEntry struct {
	name   Name
	config Config
	qos    QoSPod
}

// New returns a Manager for the tree under opts.Root. It touches nothing:
// Setup makes the tree.
func New(opts Options) (*Manager, error) {
	root, err := opts.Driver.Parse(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("reading cgroupRoot: %w", err)
	}
	settings := PodSettings{
		PidsLimit:     opts.PodPidsLimit,
		HugePageSizes: opts.HugePageSizes,
		CgroupV2:      ocgroups.IsCgroup2UnifiedMode(),
		MemoryQoS:     opts.MemoryQoS,
		CPUQuota:      opts.CPUQuota,
	}
	return &Manager{opts: opts, kubepods: root.Child(KubepodsName), settings: settings, pods: map[types.UID]podEntry{}}, nil
}

// Kubepods is the cgroup that holds every pod.
func (m *Manager) Kubepods() Name { return m.kubepods }

// Setup makes kubepods, bounded by the node's allocatable, with its
// burstable and besteffort children (see QoSSetup), and bounds the
// reserved cgroups, which must exist. It may be called again; what
// exists is kept.
func (m *Manager) Setup() error {
	kp, burstable, besteffort := QoSSetup(m.settings)
	if m.opts.Allocatable != nil {
		bound := NodeConfig(m.opts.Allocatable)
		bound.Unified = kp.Unified
		kp = bound
	}
	if err := m.ensure(m.kubepods, kp); err != nil {
		return fmt.Errorf("making the %s cgroup: %w", KubepodsName, err)
	}
	m.mu.Lock()
	// Set again below; the next updateQoS writes its own.
	m.burstable, m.kubepodsQoS = nil, nil
	m.mu.Unlock()
	if err := m.ensure(m.kubepods.Child(BurstableName), burstable); err != nil {
		return fmt.Errorf("making the %s cgroup: %w", BurstableName, err)
	}
	if err := m.ensure(m.kubepods.Child(BestEffortName), besteffort); err != nil {
		return fmt.Errorf("making the %s cgroup: %w", BestEffortName, err)
	}
	for _, cg := range slices.Sorted(maps.Keys(m.opts.Reserved)) {
		if err := m.bindReserved(cg, m.opts.Reserved[cg]); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) bindReserved(cg string, reserved v1.ResourceList) error {
	n, err := m.opts.Driver.Parse(cg)
	if err != nil {
		return fmt.Errorf("reading reserved cgroup %q: %w", cg, err)
	}
	lib, err := m.lib(n)
	if err != nil {
		return fmt.Errorf("bounding reserved cgroup %q: %w", cg, err)
	}
	if !ocgroups.PathExists(dirOf(lib)) {
		return fmt.Errorf("bounding reserved cgroup %q: the cgroup does not exist", cg)
	}
	if err := lib.Set(m.resources(NodeConfig(reserved))); err != nil {
		return fmt.Errorf("bounding reserved cgroup %q: %w", cg, err)
	}
	return nil
}

// PodParent is the pod's cgroup as the driver names it: the CgroupParent
// of its sandbox.
func (m *Manager) PodParent(pod *v1.Pod) string {
	return m.opts.Driver.Name(PodName(m.kubepods, pod))
}

// EnsurePod makes the pod's cgroup, bounded by the pod's resources, unless
// it exists: one that exists (a pod running before a restart) is adopted
// and brought to the pod's bounds the first time it is seen.
func (m *Manager) EnsurePod(pod *v1.Pod) error {
	name, want := PodName(m.kubepods, pod), PodConfig(pod, m.settings)
	m.mu.Lock()
	e, known := m.pods[pod.UID]
	m.mu.Unlock()
	if known {
		lib, err := m.lib(name)
		if err != nil {
			return err
		}
		if ocgroups.PathExists(dirOf(lib)) {
			return nil
		}
		want = e.config // what it was set to: a resize under way keeps its order
	}
	if err := m.ensure(name, want); err != nil {
		return fmt.Errorf("making the cgroup of pod %s: %w", pod.UID, err)
	}
	m.setPod(pod, name, want)
	return m.updateQoS()
}

// ResizePod brings the pod's cgroup to the pod's resources around an
// update of its containers (update), in the kubelet's order: a bound that
// grows is raised before the containers change, one that shrinks is
// lowered after them. Nothing is written when the bounds are unchanged.
func (m *Manager) ResizePod(pod *v1.Pod, update func() error) error {
	name, want := PodName(m.kubepods, pod), PodConfig(pod, m.settings)
	m.mu.Lock()
	e, known := m.pods[pod.UID]
	m.mu.Unlock()
	if !known {
		if err := m.EnsurePod(pod); err != nil {
			return err
		}
		return update()
	}
	if e.config.Equal(want) {
		return update()
	}
	lib, err := m.lib(name)
	if err != nil {
		return err
	}
	grown := Max(e.config, want)
	if err := m.set(lib, grown); err != nil {
		return fmt.Errorf("growing the cgroup of pod %s: %w", pod.UID, err)
	}
	m.setPod(pod, name, grown)
	if err := update(); err != nil {
		return err
	}
	if err := m.set(lib, want); err != nil {
		return fmt.Errorf("shrinking the cgroup of pod %s: %w", pod.UID, err)
	}
	m.setPod(pod, name, want)
	return m.updateQoS()
}

// RemovePod kills what still runs in the pod's cgroup and removes it,
// under whichever QoS cgroup it is. A pod without one is no error.
func (m *Manager) RemovePod(ctx context.Context, uid types.UID) error {
	var errs []error
	m.mu.Lock()
	e, known := m.pods[uid]
	m.mu.Unlock()
	var names []Name
	for _, parent := range m.qosParents() {
		names = append(names, parent.Child(PodPrefix+string(uid)))
	}
	if known {
		// A pod's QoS class never changes: the cgroup this Manager made
		// or adopted for it is the only one it can have.
		names = []Name{e.name}
	}
	for _, n := range names {
		if err := m.destroy(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing the cgroup of pod %s: %w", uid, err)
	}
	m.mu.Lock()
	delete(m.pods, uid)
	m.mu.Unlock()
	return m.updateQoS()
}

// PodUIDs lists the pods that have a cgroup under kubepods.
func (m *Manager) PodUIDs() ([]types.UID, error) {
	var uids []types.UID
	for _, parent := range m.qosParents() {
		lib, err := m.lib(parent)
		if err != nil {
			return nil, err
		}
		entries, err := os.ReadDir(dirOf(lib))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing pod cgroups: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			if n, ok := m.opts.Driver.ChildName(parent, e.Name()); ok {
				if uid, ok := PodUID(n.Base()); ok {
					uids = append(uids, uid)
				}
			}
		}
	}
	return uids, nil
}

func (m *Manager) qosParents() []Name {
	return []Name{m.kubepods, m.kubepods.Child(BurstableName), m.kubepods.Child(BestEffortName)}
}

func (m *Manager) setPod(pod *v1.Pod, name Name, c Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods[pod.UID] = podEntry{name: name, config: c, qos: QoSPodOf(pod)}
}

// updateQoS sets the burstable cgroup's shares from the pods it holds,
// and the memory protection of kubepods and burstable (QoSConfigs).
func (m *Manager) updateQoS() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	pods := make([]QoSPod, 0, len(m.pods))
	for _, e := range m.pods {
		pods = append(pods, e.qos)
	}
	kubepods, burstable, _ := QoSConfigs(pods, m.settings)
	if kubepods.Unified != nil && (m.kubepodsQoS == nil || !m.kubepodsQoS.Equal(kubepods)) {
		lib, err := m.lib(m.kubepods)
		if err != nil {
			return err
		}
		if err := m.set(lib, kubepods); err != nil {
			m.kubepodsQoS = nil
			return fmt.Errorf("updating the %s cgroup: %w", KubepodsName, err)
		}
		m.kubepodsQoS = &kubepods
	}
	if m.burstable != nil && m.burstable.Equal(burstable) {
		return nil
	}
	lib, err := m.lib(m.kubepods.Child(BurstableName))
	if err != nil {
		return err
	}
	if err := m.set(lib, burstable); err != nil {
		m.burstable = nil
		return fmt.Errorf("updating the %s cgroup: %w", BurstableName, err)
	}
	m.burstable = &burstable
	return nil
}

// ensure makes the cgroup when it does not exist and sets it to c.
func (m *Manager) ensure(n Name, c Config) error {
	lib, err := m.lib(n)
	if err != nil {
		return err
	}
	if !ocgroups.PathExists(dirOf(lib)) {
		start := time.Now()
		if err := lib.Apply(-1); err != nil {
			return err
		}
		observe(opCreate, start)
		m.opts.Log.V(1).Info("Created cgroup", "cgroup", m.opts.Driver.Name(n))
	}
	return m.set(lib, c)
}

func (m *Manager) set(lib ocgroups.Manager, c Config) error {
	start := time.Now()
	if err := lib.Set(m.resources(c)); err != nil {
		return err
	}
	observe(opUpdate, start)
	return nil
}

// destroyAttempts is how many times the processes left in a cgroup are
// killed before it is removed, as the kubelet does.
const destroyAttempts = 5

// destroy kills the processes left in the cgroup and removes it.
func (m *Manager) destroy(ctx context.Context, n Name) error {
	lib, err := m.lib(n)
	if err != nil {
		return err
	}
	if !ocgroups.PathExists(dirOf(lib)) {
		return nil
	}
	start := time.Now()
	for i := 0; i < destroyAttempts; i++ {
		pids, err := lib.GetAllPids()
		if err != nil || len(pids) == 0 {
			break
		}
		m.opts.Log.Info("Killing processes left in a pod cgroup", "cgroup", m.opts.Driver.Name(n), "pids", len(pids))
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				m.opts.Log.Error(err, "Unable to kill a process left in a pod cgroup", "pid", pid)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i+1) * 20 * time.Millisecond):
		}
	}
	if err := lib.Destroy(); err != nil {
		return err
	}
	observe(opDestroy, start)
	m.opts.Log.V(1).Info("Removed cgroup", "cgroup", m.opts.Driver.Name(n))
	return nil
}

// lib is the library's manager of the cgroup n.
func (m *Manager) lib(n Name) (ocgroups.Manager, error) {
	cg := &ocgroups.Cgroup{Resources: &ocgroups.Resources{SkipDevices: true}}
	if m.opts.Driver == Systemd {
		cg.Systemd = true
		cg.Name = n.SystemdSlice()
		cg.Parent = n.Parent().SystemdSlice()
	} else {
		cg.Path = n.Cgroupfs()
	}
	paths, err := m.podPaths(n)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup %s: %w", m.opts.Driver.Name(n), err)
	}
	lib, err := ocmanager.NewWithPaths(cg, paths)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup %s: %w", m.opts.Driver.Name(n), err)
	}
	return lib, nil
}

// podPaths is the directory of each controller of the pod cgroup n, from
// those of its QoS cgroup, for cgroupfs on cgroup v1; nil (let the library
// resolve them) for any other cgroup, driver or version.
func (m *Manager) podPaths(n Name) (map[string]string, error) {
	if m.opts.Driver == Systemd || ocgroups.IsCgroup2UnifiedMode() || len(n) == 0 {
		return nil, nil
	}
	if _, ok := PodUID(n.Base()); !ok {
		return nil, nil
	}
	parent := n.Parent()
	if !slices.ContainsFunc(m.qosParents(), func(q Name) bool { return q.Cgroupfs() == parent.Cgroupfs() }) {
		return nil, nil
	}
	m.pathsMu.Lock()
	defer m.pathsMu.Unlock()
	base, ok := m.qosPaths[parent.Cgroupfs()]
	if !ok {
		lib, err := ocmanager.New(&ocgroups.Cgroup{Path: parent.Cgroupfs(), Resources: &ocgroups.Resources{SkipDevices: true}})
		if err != nil {
			return nil, err
		}
		base = lib.GetPaths()
		if m.qosPaths == nil {
			m.qosPaths = map[string]map[string]string{}
		}
		m.qosPaths[parent.Cgroupfs()] = base
	}
	paths := make(map[string]string, len(base))
	for sys, dir := range base {
		paths[sys] = filepath.Join(dir, n.Base())
	}
	return paths, nil
}

// dirOf is the cgroup's directory in the hierarchy nodelet reads: the
// unified one on cgroup v2, the cpu controller's on v1.
func dirOf(lib ocgroups.Manager) string {
	if ocgroups.IsCgroup2UnifiedMode() {
		return lib.Path("")
	}
	return lib.Path("cpu")
}

// resources is c for the library (see libResources).
func (m *Manager) resources(c Config) *ocgroups.Resources {
	return libResources(c, m.opts.HugePageSizes, m.settings.CgroupV2)
}

// libResources is c for the library: huge page limits only of the sizes
// the hugetlb controller has (none without it), cgroup v2 files only on
// cgroup v2, CPU shares as a weight there.
func libResources(c Config, hugePageSizes []string, cgroupV2 bool) *ocgroups.Resources {
	r := &ocgroups.Resources{SkipDevices: true, PidsLimit: c.PidsLimit}
	if c.CPUShares != nil {
		r.CpuShares = *c.CPUShares
	}
	if c.CPUQuota != nil {
		r.CpuQuota = *c.CPUQuota
	}
	if c.CPUPeriod != nil {
		r.CpuPeriod = *c.CPUPeriod
	}
	if c.Memory != nil {
		r.Memory = *c.Memory
	}
	for _, size := range slices.Sorted(maps.Keys(c.HugePages)) {
		if slices.Contains(hugePageSizes, size) {
			r.HugetlbLimit = append(r.HugetlbLimit, &ocgroups.HugepageLimit{Pagesize: size, Limit: uint64(max(c.HugePages[size], 0))})
		}
	}
	if cgroupV2 && len(c.Unified) > 0 {
		r.Unified = maps.Clone(c.Unified)
	}
	if cgroupV2 && r.CpuShares != 0 {
		r.CpuWeight = ocgroups.ConvertCPUSharesToCgroupV2Value(r.CpuShares)
		r.CpuShares = 0
	}
	return r
}
