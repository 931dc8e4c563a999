package hollow

import (
	"fmt"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// TaintKey is the key of the NoSchedule taint every hollow node registers
// with (see Taint).
const TaintKey = "nodelet.io/hollow"

// Taint is on every hollow node, so that no real workload is scheduled to a
// node whose runtime runs nothing. nodelet's admission enforces NoSchedule
// taints on bound pods too: a pod meant for a hollow node, bound by
// spec.nodeName, carries Toleration.
func Taint() corev1.Taint {
	return corev1.Taint{Key: TaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}
}

// Toleration tolerates Taint.
func Toleration() corev1.Toleration {
	return corev1.Toleration{Key: TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}

// NodeNames returns count node names, prefix-0000, prefix-0001, …: zero
// padded to four digits so that they sort in their order.
func NodeNames(prefix string, count int) []string {
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return names
}

// NodeConfig returns the defaulted configuration of hollow node name, whose
// state lives under rootDir/name, changed by mutate before it is defaulted.
// Everything that would touch the machine is turned off or kept in the
// node's directory: no node API server, health or metrics listener (a
// thousand nodes in one process cannot share their ports), no QoS cgroups,
// logs and their links under the node's directory, no resolv.conf of the
// host. Every node registers with Taint, added to the taints mutate leaves
// (once: a taint of its key and effect that mutate set is kept as it is).
// The eviction thresholds are near empty, since every hollow node
// measures the same machine's memory and disks. The rest (status and lease
// frequencies, relist period, API QPS) is nodelet's default, so that what a
// hollow node asks of the API server is what a real one asks.
func NodeConfig(rootDir, name string, mutate func(*v1alpha1.NodeletConfiguration)) (*v1alpha1.NodeletConfiguration, error) {
	dir := filepath.Join(rootDir, name)
	cfg := &v1alpha1.NodeletConfiguration{
		NodeName:             name,
		RootDir:              dir,
		PodLogsDir:           filepath.Join(dir, "logs"),
		ContainerLogLinksDir: ptr.To(filepath.Join(dir, "containers")),
		HealthzBindAddress:   "0",
		MetricsBindAddress:   "0",
		ResolvConf:           ptr.To(""),
		CgroupsPerQOS:        ptr.To(false),
		EvictionHard: map[string]string{
			"memory.available":  "1Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
	}
	cfg.Server.Port = ptr.To(int32(0))
	if mutate != nil {
		mutate(cfg)
	}
	if !slices.ContainsFunc(cfg.RegisterWithTaints, func(t corev1.Taint) bool {
		return t.Key == TaintKey && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		cfg.RegisterWithTaints = append(cfg.RegisterWithTaints, Taint())
	}
	v1alpha1.SetDefaults(cfg)
	if errs := v1alpha1.Validate(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("configuration of hollow node %s: %w", name, errs.ToAggregate())
	}
	return cfg, nil
}
