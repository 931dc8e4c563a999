package features

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// The kubelet's gates nodelet acts on. The stage and default are the
// kubelet's in the Kubernetes version nodelet implements (a test checks them
// against kubeletGates); docs/configuration.md says what nodelet does with
// each. Every other gate of the kubelet is known too (kubeletGates), so a
// kubelet's configuration never stops nodelet, but changes nothing.
const (
	// ContainerCheckpoint: the node API's /checkpoint, a checkpoint of a
	// running container written by the runtime.
	ContainerCheckpoint featuregate.Feature = "ContainerCheckpoint"
	// ContainerRestartRules: restartPolicyRules on containers, restarting
	// or not by exit code.
	ContainerRestartRules featuregate.Feature = "ContainerRestartRules"
	// DRAExtendedResource: extended resources a DRA claim of the
	// scheduler's provides (status.extendedResourceClaimStatus) are not
	// counted against the node's, and that claim is prepared with the
	// pod's own.
	DRAExtendedResource featuregate.Feature = "DRAExtendedResource"
	// GracefulNodeShutdown: the kubelet's node shutdown manager, which
	// delays the machine's shutdown with a systemd-logind inhibitor lock
	// (shutdownGracePeriod, shutdownGracePeriodCriticalPods) to stop the
	// pods in order.
	GracefulNodeShutdown featuregate.Feature = "GracefulNodeShutdown"
	// GracefulNodeShutdownBasedOnPodPriority: shutdownGracePeriodByPodPriority,
	// grace periods by ranges of pod priority.
	GracefulNodeShutdownBasedOnPodPriority featuregate.Feature = "GracefulNodeShutdownBasedOnPodPriority"
	// EnvFiles: env vars from a file in an emptyDir volume
	// (valueFrom.fileKeyRef), which an init container wrote.
	EnvFiles featuregate.Feature = "EnvFiles"
	// ImageVolume: volumes of type image, an OCI image mounted read-only.
	ImageVolume featuregate.Feature = "ImageVolume"
	// InPlacePodVerticalScaling: resizing a running pod's containers.
	InPlacePodVerticalScaling featuregate.Feature = "InPlacePodVerticalScaling"
	// InPlacePodLevelResourcesVerticalScaling: resizing a pod's
	// pod-level resources; declared in the Node's status.declaredFeatures,
	// without which the API server refuses such resizes.
	InPlacePodLevelResourcesVerticalScaling featuregate.Feature = "InPlacePodLevelResourcesVerticalScaling"
	// InPlacePodVerticalScalingInitContainers: resizing init containers
	// that are not sidecars; declared as the one above.
	InPlacePodVerticalScalingInitContainers featuregate.Feature = "InPlacePodVerticalScalingInitContainers"
	// KubeletEnsureSecretPulledImages: image pull records, so that a pod
	// uses an image another pod pulled only with credentials that could
	// pull it (imagePullCredentialsVerificationPolicy).
	KubeletEnsureSecretPulledImages featuregate.Feature = "KubeletEnsureSecretPulledImages"
	// KubeletServiceAccountTokenForCredentialProviders: image credential
	// provider plugins with tokenAttributes get a service account token
	// bound to the pod.
	KubeletServiceAccountTokenForCredentialProviders featuregate.Feature = "KubeletServiceAccountTokenForCredentialProviders"
	// KubeletCrashLoopBackOffMax: crashLoopBackOff.maxContainerRestartPeriod.
	KubeletCrashLoopBackOffMax featuregate.Feature = "KubeletCrashLoopBackOffMax"
	// MemoryQoS: cgroup v2 memory protection and throttling (memory.min,
	// memory.low, memory.high) from memory requests and limits, with
	// memoryThrottlingFactor and memoryReservationPolicy.
	MemoryQoS featuregate.Feature = "MemoryQoS"
	// NodeSwap: memorySwap.swapBehavior (NoSwap, LimitedSwap).
	NodeSwap featuregate.Feature = "NodeSwap"
	// PodCertificateRequest: projected podCertificate volume sources, a
	// key and a certificate a signer issues through a PodCertificateRequest.
	PodCertificateRequest featuregate.Feature = "PodCertificateRequest"
	// PodObservedGenerationTracking: observedGeneration in pod status and
	// conditions.
	PodObservedGenerationTracking featuregate.Feature = "PodObservedGenerationTracking"
	// ResourceHealthStatus: the health of the devices a container holds
	// (device plugins' and DRA drivers'), in its status'
	// allocatedResourcesStatus, and the DRA drivers' health streams.
	ResourceHealthStatus featuregate.Feature = "ResourceHealthStatus"
	// ResourceHealthStatusMessage: a DRA driver's message about a
	// device's health, in allocatedResourcesStatus.
	ResourceHealthStatusMessage featuregate.Feature = "ResourceHealthStatusMessage"
	// RecursiveReadOnlyMounts: recursiveReadOnly on volume mounts.
	RecursiveReadOnlyMounts featuregate.Feature = "RecursiveReadOnlyMounts"
	// SupplementalGroupsPolicy: securityContext.supplementalGroupsPolicy.
	SupplementalGroupsPolicy featuregate.Feature = "SupplementalGroupsPolicy"
	// UserNamespacesSupport: pods with hostUsers: false run in a user
	// namespace.
	UserNamespacesSupport featuregate.Feature = "UserNamespacesSupport"
)

// specs are the stages and defaults of the gates nodelet acts on.
var specs = map[featuregate.Feature]featuregate.FeatureSpec{
	ContainerCheckpoint:                              {Default: true, PreRelease: featuregate.Beta},
	ContainerRestartRules:                            {Default: true, PreRelease: featuregate.Beta},
	DRAExtendedResource:                              {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	EnvFiles:                                         {Default: true, PreRelease: featuregate.Beta},
	GracefulNodeShutdown:                             {Default: true, PreRelease: featuregate.Beta},
	GracefulNodeShutdownBasedOnPodPriority:           {Default: true, PreRelease: featuregate.Beta},
	ImageVolume:                                      {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	InPlacePodVerticalScaling:                        {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	KubeletCrashLoopBackOffMax:                       {Default: true, PreRelease: featuregate.Beta},
	KubeletEnsureSecretPulledImages:                  {Default: true, PreRelease: featuregate.Beta},
	KubeletServiceAccountTokenForCredentialProviders: {Default: true, PreRelease: featuregate.Beta},
	MemoryQoS:                                        {Default: true, PreRelease: featuregate.Beta},
	NodeSwap:                                         {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	PodCertificateRequest:                            {Default: true, PreRelease: featuregate.GA},
	PodObservedGenerationTracking:                    {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	RecursiveReadOnlyMounts:                          {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	ResourceHealthStatus:                             {Default: true, PreRelease: featuregate.Beta},
	ResourceHealthStatusMessage:                      {Default: true, PreRelease: featuregate.Beta},
	SupplementalGroupsPolicy:                         {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	UserNamespacesSupport:                            {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
}

// New returns a gate with every feature the kubelet knows at the kubelet's
// default: those nodelet acts on (specs), the logging gates of
// k8s.io/component-base, which nodelet's logging reads, and the rest of
// kubeletGates.
func New() featuregate.MutableFeatureGate {
	g := featuregate.NewFeatureGate()
	if err := g.Add(specs); err != nil {
		panic(fmt.Sprintf("feature gates: %v", err))
	}
	if err := logsapi.AddFeatureGates(g); err != nil {
		panic(fmt.Sprintf("logging feature gates: %v", err))
	}
	known := g.GetAll()
	rest := map[featuregate.Feature]featuregate.FeatureSpec{}
	for name, spec := range kubeletGates {
		if _, ok := known[name]; !ok {
			rest[name] = spec
		}
	}
	if err := g.Add(rest); err != nil {
		panic(fmt.Sprintf("kubelet feature gates: %v", err))
	}
	return g
}

// Implemented reports whether nodelet acts on the gate name: one of specs
// or a logging gate.
func Implemented(name string) bool {
	if _, ok := specs[featuregate.Feature(name)]; ok {
		return true
	}
	_, ok := loggingGates()[featuregate.Feature(name)]
	return ok
}

// loggingGates are the gates of k8s.io/component-base's logging.
func loggingGates() map[featuregate.Feature]featuregate.FeatureSpec {
	g := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(g); err != nil {
		panic(fmt.Sprintf("logging feature gates: %v", err))
	}
	all := g.GetAll()
	delete(all, "AllAlpha")
	delete(all, "AllBeta")
	return all
}

// Unimplemented returns a warning for each gate of m that the kubelet knows
// but nodelet does not act on, set against the kubelet's default: nodelet
// accepts it, as a kubelet's configuration sets it, and behaves as the
// kubelet does at the default. Sorted by name.
func Unimplemented(m map[string]bool) []string {
	var out []string
	for name, on := range m {
		spec, ok := kubeletGates[featuregate.Feature(name)]
		if !ok || Implemented(name) || on == spec.Default {
			continue
		}
		out = append(out, fmt.Sprintf("feature gate %s=%t is the kubelet's (%s, default %t) but nodelet does not implement it: nodelet behaves as with %s=%t",
			name, on, strings.ToLower(string(spec.PreRelease)), spec.Default, name, spec.Default))
	}
	sort.Strings(out)
	return out
}

// Gate is the process's feature gate, set once at start-up by Set.
var Gate = New()

// Enabled reports whether feature is on in the process's gate.
func Enabled(feature featuregate.Feature) bool {
	return Gate.Enabled(feature)
}

// Check reports an error naming the first gate of m that is unknown or may
// not take the value given (a gate locked to its default).
func Check(m map[string]bool) error {
	return New().SetFromMap(m)
}

// Set sets the process's gate from m.
func Set(m map[string]bool) error {
	return Gate.SetFromMap(m)
}

// Known lists the names of the gates nodelet knows (every gate the
// kubelet knows), sorted.
func Known() []string {
	var names []string
	for name := range New().GetAll() {
		names = append(names, string(name))
	}
	sort.Strings(names)
	return names
}
