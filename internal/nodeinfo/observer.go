package nodeinfo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/features"
	"github.com/nodelet/nodelet/internal/version"
)

// DefaultRuntimeTimeout bounds the runtime calls of one observation.
const DefaultRuntimeTimeout = 5 * time.Second

// Observer gathers Observations of one node from the host and the runtime.
type Observer struct {
	host           Host
	runtime        Runtime
	nodeName       string
	nodeIP         net.IP
	rootDir        string
	hostRoot       string
	maxPods        int32
	port           int32
	systemReserved corev1.ResourceList
	kubeReserved   corev1.ResourceList
	evictionHard   Thresholds
	runtimeTimeout time.Duration
}

// NewObserver returns an Observer for the node cfg configures. cfg must be
// defaulted; its reservations and thresholds are parsed here so that a bad
// value is reported once, at start. A nil runtime makes every observation
// report the runtime as down.
func NewObserver(cfg *v1alpha1.NodeletConfiguration, host Host, rt Runtime) (*Observer, error) {
	sys, err := ParseResourceList(cfg.SystemReserved)
	if err != nil {
		return nil, fmt.Errorf("parsing systemReserved: %w", err)
	}
	kube, err := ParseResourceList(cfg.KubeReserved)
	if err != nil {
		return nil, fmt.Errorf("parsing kubeReserved: %w", err)
	}
	hard, err := ParseThresholds(cfg.EvictionHard)
	if err != nil {
		return nil, fmt.Errorf("parsing evictionHard: %w", err)
	}
	var ip net.IP
	if cfg.NodeIP != "" {
		if ip = net.ParseIP(cfg.NodeIP); ip == nil {
			return nil, fmt.Errorf("nodeIP %q is not an IP address", cfg.NodeIP)
		}
	}
	var port int32
	if cfg.Server.Port != nil {
		port = *cfg.Server.Port
	}
	timeout := min(DefaultRuntimeTimeout, max(cfg.NodeStatusUpdateFrequency.Duration, time.Second))
	return &Observer{
		host: host, runtime: rt, nodeName: cfg.NodeName, nodeIP: ip, rootDir: cfg.RootDir, hostRoot: cfg.HostRoot,
		maxPods: cfg.MaxPods, port: port, systemReserved: sys, kubeReserved: kube,
		evictionHard: hard, runtimeTimeout: timeout,
	}, nil
}

// Observe looks at the node now. Host readings that fail are left out (and
// logged at V(1)); a runtime that fails is reported in RuntimeProblems.
func (o *Observer) Observe(ctx context.Context) Observation {
	logger := log.FromContext(ctx)
	soft := func(what string, err error) {
		logger.V(1).Info("Could not read host information for node status", "what", what, "err", err)
	}

	mem, err := o.readMemory()
	if err != nil {
		soft("memory", err)
	}
	rootFS, err := o.host.Statfs(o.rootDir)
	if err != nil {
		soft("root filesystem", err)
	}
	usage := Usage{Memory: mem, RootFS: rootFS}
	if usage.PIDMax, usage.Tasks, err = o.readPIDs(); err != nil {
		soft("pids", err)
	}

	var obs Observation
	if mem.TotalBytes > 0 {
		obs.Capacity = Capacity(o.host.NumCPU(), mem, rootFS, o.maxPods)
		obs.Allocatable = Allocatable(obs.Capacity, o.systemReserved, o.kubeReserved, o.evictionHard)
	}
	obs.Pressure = EvaluatePressure(usage, o.evictionHard)
	obs.Addresses = o.addresses(soft)
	obs.NodeInfo = o.systemInfo(soft)
	obs.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: o.port}}
	obs.DeclaredFeatures = DeclaredFeatures(func(name string) bool { return features.Enabled(featuregate.Feature(name)) })
	o.observeRuntime(ctx, &obs)
	return obs
}

func (o *Observer) observeRuntime(ctx context.Context, obs *Observation) {
	if o.runtime == nil {
		obs.RuntimeProblems = []string{"container runtime is down: no runtime configured"}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, o.runtimeTimeout)
	defer cancel()
	st, err := o.runtime.Status(ctx)
	obs.RuntimeProblems = RuntimeProblems(st, err)
	if err != nil {
		// Down: do not wait for two more timeouts.
		return
	}
	if v, err := o.runtime.Version(ctx); err == nil {
		obs.NodeInfo.ContainerRuntimeVersion = RuntimeVersion(v)
	}
	if imgs, err := o.runtime.ListImages(ctx, nil); err == nil {
		obs.Images, obs.ImagesKnown = Images(imgs), true
	}
	if fs, ok := o.runtime.(FeatureSource); ok {
		if f, err := fs.Features(ctx); err == nil {
			obs.Features, obs.RuntimeHandlers, obs.FeaturesKnown = NodeFeatures(f), NodeRuntimeHandlers(f), true
		}
	}
}

func (o *Observer) readMemory() (Memory, error) {
	data, err := o.host.ReadFile(MeminfoPath)
	if err != nil {
		return Memory{}, err
	}
	return ParseMeminfo(data)
}

func (o *Observer) readPIDs() (pidMax, tasks int64, err error) {
	data, err := o.host.ReadFile(PIDMaxPath)
	if err != nil {
		return 0, 0, err
	}
	if pidMax, err = ParseInt(data); err != nil {
		return 0, 0, fmt.Errorf("parsing %s: %w", PIDMaxPath, err)
	}
	if data, err = o.host.ReadFile(LoadavgPath); err != nil {
		return 0, 0, err
	}
	if tasks, err = ParseTaskCount(data); err != nil {
		return 0, 0, err
	}
	return pidMax, tasks, nil
}

// addresses are the InternalIP (configured or detected) and the Hostname,
// which is the node name: nodelet's node name plays the part of the
// kubelet's --hostname-override.
func (o *Observer) addresses(soft func(string, error)) []corev1.NodeAddress {
	ip := o.nodeIP
	if ip == nil {
		ip = NodeIP(o.host, soft)
	}
	var out []corev1.NodeAddress
	if ip != nil {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: o.nodeName})
}

// NodeIP is the address a node without a configured nodeIP reports, as
// ChooseNodeIP picks it. The default route's interface is read alone
// first: when it has an IPv4 address (as a node has) no other interface is
// read, and a node has a veth per pod. soft is told of what could not be
// read.
func NodeIP(host Host, soft func(what string, err error)) net.IP {
	route, err := host.ReadFile(RoutePath)
	if err != nil {
		soft("default route", err)
	}
	def := DefaultRouteInterface(route)
	if def != "" {
		ifc, err := host.Interface(def)
		if err != nil {
			soft("default route's interface", err)
		} else if ip := defaultInterfaceIP(ifc); ip != nil {
			return ip
		}
	}
	ifaces, err := host.Interfaces()
	if err != nil {
		soft("network interfaces", err)
	}
	return ChooseNodeIP(def, ifaces)
}

func (o *Observer) systemInfo(soft func(string, error)) corev1.NodeSystemInfo {
	read := func(path string, optional bool) string {
		data, err := o.host.ReadFile(path)
		if err != nil {
			if !optional {
				soft(path, err)
			}
			return ""
		}
		return strings.TrimSpace(string(data))
	}
	kernel, err := o.host.KernelRelease()
	if err != nil {
		soft("kernel release", err)
	}
	osImage := "Linux"
	if data, err := o.readOSRelease(); err == nil {
		osImage = ParseOSRelease(data)
	} else {
		soft("os-release", err)
	}
	return corev1.NodeSystemInfo{
		MachineID:       read(o.onHost(MachineIDPath), false),
		SystemUUID:      strings.ToLower(read(ProductUUIDPath, true)),
		BootID:          read(BootIDPath, false),
		KernelVersion:   kernel,
		OSImage:         osImage,
		OperatingSystem: runtime.GOOS,
		Architecture:    runtime.GOARCH,
		KubeletVersion:  version.KubeletVersion(),
	}
}

// onHost is where a file of the host's root filesystem is seen: under
// hostRoot.
func (o *Observer) onHost(path string) string {
	if o.hostRoot == "" {
		return path
	}
	return filepath.Join(o.hostRoot, path)
}

// readOSRelease reads the host's os-release, from /usr/lib when /etc has
// none.
func (o *Observer) readOSRelease() ([]byte, error) {
	data, err := o.host.ReadFile(o.onHost(OSReleasePath))
	if err == nil {
		return data, nil
	}
	data, fallbackErr := o.host.ReadFile(o.onHost(OSReleaseFallbackPath))
	if fallbackErr != nil {
		return nil, errors.Join(err, fallbackErr)
	}
	return data, nil
}
