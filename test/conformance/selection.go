package conformance

import (
	_ "embed"
	"fmt"
	"regexp"
	"slices"

	"sigs.k8s.io/yaml"
)

// ConformanceFocus selects the node specs and the storage specs of the
// volume types a node agent implements itself, among [Conformance] specs,
// and the resource and eviction specs listed below.
var ConformanceFocus = []string{
	`\[sig-node\].*\[Conformance\]`,
	`\[sig-storage\] (ConfigMap|Secrets|Projected [a-zA-Z]+|Downward API volume|EmptyDir volumes|EmptyDir wrapper volumes|HostPath|Subpath) .*\[Conformance\]`,
	// The storage API's [Conformance] specs: the lifecycle and status of
	// PersistentVolumes and claims, StorageClasses, CSIDrivers, CSINodes,
	// CSIStorageCapacities, VolumeAttachments and VolumeAttributesClasses,
	// and a pod with CSI inline volumes accepted by the API. They exercise
	// the API server and the controller-manager, not the node agent: no
	// spec waits for a pod of theirs to run (the inline volumes' pod names
	// a driver that does not exist, and is deleted at once).
	`\[sig-storage\] (PersistentVolumes|CSIInlineVolumes|CSINodes|CSIStorageCapacity|StorageClasses|VolumeAttachment|VolumeAttributesClass) .*\[Conformance\]`,
	// Beyond [Conformance], the node's resource and eviction specs that
	// run on one shared node: a pod past its ephemeral-storage limit is
	// evicted and terminal; a pod the node cannot fit is rejected.
	regexp.QuoteMeta(`[sig-node] Pods Extended Pod Container lifecycle evicted pods should be terminal`),
	regexp.QuoteMeta(`[sig-node] PodRejectionStatus Kubelet should reject pod when the node didn't have enough resource`),
}

// ConformanceSkip leaves out what cannot run on one shared test node or
// needs more than the node agent: serial and disruptive specs, slow and
// flaky ones, and feature-gated ones.
var ConformanceSkip = []string{
	`\[Serial\]`,
	`\[Disruptive\]`,
	`\[Slow\]`,
	`\[Flaky\]`,
	`\[Feature:[^\]]*\]`,
}

// SmokeFocus is the subset make test runs: pods and their lifecycle, logs,
// exec, environment, and ConfigMap and projected volumes.
var SmokeFocus = []string{
	regexp.QuoteMeta(`[sig-node] Pods should get a host IP [Conformance] [NodeConformance]`),
	regexp.QuoteMeta(`[sig-node] Pods should be submitted and removed [Conformance] [NodeConformance]`),
	regexp.QuoteMeta(`[sig-node] Kubelet when scheduling a busybox command in a pod should print the output to logs [Conformance] [NodeConformance]`),
	regexp.QuoteMeta(`[sig-node] Pods should support remote command execution over websockets [Conformance] [NodeConformance]`),
	regexp.QuoteMeta(`[sig-node] Pods should support retrieving logs from the container over websockets [Conformance] [NodeConformance]`),
	regexp.QuoteMeta(`[sig-node] Variable Expansion should allow composing env vars into new env vars [Conformance] [NodeConformance]`),
	regexp.QuoteMeta(`[sig-storage] ConfigMap should be consumable from pods in volume [Conformance] [NodeConformance]`),
	regexp.QuoteMeta(`[sig-storage] ConfigMap updates should be reflected in volume [Conformance] [NodeConformance]`),
	regexp.QuoteMeta(`[sig-storage] Projected downwardAPI should provide container's memory limit [Conformance] [NodeConformance]`),
}

// ImageVolumeSmokeFocus is the image volume spec, which the smoke runs
// where the runtime mounts image volumes (containerd 2): it pulls its
// image through the harness's registry mirror.
var ImageVolumeSmokeFocus = regexp.QuoteMeta(`[sig-node] ImageVolume should succeed with pod and pull policy of Always [LinuxOnly] [MinimumKubeletVersion:1.35] [Conformance]`)

// SkipEntry is a selected spec that is not run, and why: it fails for a
// reason outside the node agent (no kube-proxy, no cluster DNS, cgroup v1,
// an image that cannot be built offline), and the kubelet fails it here
// too. With Agents, it is skipped only on those agents: a spec nodelet
// fails for its own reasons stays in nodelet's column even when the
// environment keeps the kubelet from running it (or makes it crash).
type SkipEntry struct {
	Name   string  `json:"name"`
	Reason string  `json:"reason"`
	Agents []Agent `json:"agents,omitempty"`
}

// AppliesTo reports whether the entry skips the spec on agent.
func (e SkipEntry) AppliesTo(agent Agent) bool {
	return len(e.Agents) == 0 || slices.Contains(e.Agents, agent)
}

//go:embed skips.yaml
var skipsYAML []byte

// SkipList returns the entries of skips.yaml.
func SkipList() ([]SkipEntry, error) {
	var entries []SkipEntry
	if err := yaml.UnmarshalStrict(skipsYAML, &entries); err != nil {
		return nil, fmt.Errorf("parsing skips.yaml: %w", err)
	}
	for _, e := range entries {
		for _, a := range e.Agents {
			if a != AgentNodelet && a != AgentKubelet {
				return nil, fmt.Errorf("skips.yaml: %q: unknown agent %q", e.Name, a)
			}
		}
		if e.Name == "" || e.Reason == "" {
			return nil, fmt.Errorf("skips.yaml: an entry needs a name and a reason: %+v", e)
		}
	}
	return entries, nil
}

// SkipEntriesIn returns the entries whose spec one of the focus
// expressions selects: the skip list's entries of one suite.
func SkipEntriesIn(entries []SkipEntry, focus []string) []SkipEntry {
	res := make([]*regexp.Regexp, 0, len(focus))
	for _, f := range focus {
		res = append(res, regexp.MustCompile(f))
	}
	var out []SkipEntry
	for _, e := range entries {
		if slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(e.Name) }) {
			out = append(out, e)
		}
	}
	return out
}

// SkipPatterns turns the skip entries for agent into --skip expressions
// matching exactly their names.
func SkipPatterns(entries []SkipEntry, agent Agent) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.AppliesTo(agent) {
			out = append(out, regexp.QuoteMeta(e.Name))
		}
	}
	return out
}

// NetworkFocus selects the sig-network specs for the multi-node cluster:
// the pod-to-pod, node-to-pod and Service granular checks, and the
// [Conformance] specs of sig-network, which need the node agent, the
// node network, kube-proxy and CoreDNS and nothing else.
var NetworkFocus = []string{
	`\[sig-network\] Networking Granular Checks`,
	`\[sig-network\].*\[Conformance\]`,
}

// NetworkSkip adds to ConformanceSkip what the multi-node cluster has not:
// IPv6 and dual-stack, SCTP, cloud load balancers, and network policy.
var NetworkSkip = []string{
	`\[LinuxOnly\].*IPv6|IPv6.*\[LinuxOnly\]|\[IPv6DualStack\]|\[Feature:IPv6DualStack\]`,
	`SCTP`,
	`LoadBalancer`,
	`NetworkPolicy`,
}

// NetworkSmokeFocus is the sig-network subset make test runs on the
// multi-node cluster: pods on different nodes reach each other, and a
// Service's name resolves and answers.
var NetworkSmokeFocus = []string{
	regexp.QuoteMeta(`[sig-network] Networking Granular Checks: Pods should function for intra-pod communication: http [Conformance] [NodeConformance]`),
}

// StorageFocus selects Kubernetes' CSI mock specs for the storage suite:
// the mock CSI driver runs inside e2e.test and the node agent reaches it
// through a pod that forwards its socket, so the specs see every CSI call
// the node agent makes (staging, publishing, pod info, tokens, fsGroup,
// attach limits, error handling).
var StorageFocus = []string{
	`\[sig-storage\] CSI Mock`,
}

// StorageSkip replaces ConformanceSkip in the storage suite: the [Slow]
// mock specs (NodeStage and NodeUnstage error cases, attach limits) run,
// they are about the node agent; serial, disruptive, flaky and
// feature-gated ones do not.
var StorageSkip = []string{
	`\[Serial\]`,
	`\[Disruptive\]`,
	`\[Flaky\]`,
	`\[Feature:[^\]]*\]`,
}

// DRAFocus selects Kubernetes' dynamic resource allocation specs
// (test/e2e/dra, labelled [DRA]): their test driver runs inside e2e.test
// and reaches the node agent through a pod that forwards its registration
// and DRA sockets (dra-test-driver-proxy.yaml), so the specs see every
// NodePrepareResources and NodeUnprepareResources call; the control-plane
// specs among them exercise the API server, the scheduler and the
// controller-manager.
var DRAFocus = []string{
	`\[DRA\]`,
}

// DRASkip replaces ConformanceSkip in the DRA suite. Serial, disruptive
// and flaky specs do not run; [Slow] ones do (they are about the node
// agent), and so do [Feature:DynamicResourceAllocation] ones (CDI in the
// runtime, the driver's sockets under the agent's root directory: the
// cluster has both) and those of feature gates on by default in 1.37,
// beta ones included. Left out besides:
var DRASkip = []string{
	`\[Serial\]`,
	`\[Disruptive\]`,
	`\[Flaky\]`,
	// specs of feature gates off by default (alpha ones, beta ones off by
	// default, GenericWorkload, deprecated and locked off: the framework
	// marks every one of them so), which the cluster leaves off;
	`\[Feature:OffByDefault\]`,
	// and the specs that need two nodes: the cluster has one (the driver's
	// manifest mounts the node agent's root directory, which e2e.test
	// knows as one path).
	`\[DRA\] (control plane|kubelet \[Feature:DynamicResourceAllocation\] on multiple nodes) with (different ResourceSlices|node-local resources) `,
}
