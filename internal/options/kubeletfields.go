package options

// fieldSupport says what nodelet does with a field of the kubelet's
// KubeletConfiguration.
type fieldSupport int

const (
	// mapped fields are carried onto NodeletConfiguration, mostly under the
	// same name.
	mapped fieldSupport = iota
	// ignored fields are accepted whatever their value: nodelet has nothing
	// they would change, or does what they ask without being told.
	ignored
	// refused fields are accepted only unset, empty, zero or at the
	// kubelet's default; any other value is an error naming the field.
	refused
	// warned fields are accepted whatever their value, which nodelet does
	// not act on; a value other than empty is logged as a warning. They
	// change nothing a pod or a user of the cluster sees.
	warned
)

func (s fieldSupport) String() string {
	switch s {
	case mapped:
		return "mapped"
	case ignored:
		return "ignored"
	case warned:
		return "accepted with a warning"
	default:
		return "refused unless default"
	}
}

// kubeletField is one top-level field of KubeletConfiguration.
type kubeletField struct {
	// name is the field's JSON name.
	name    string
	support fieldSupport
	// accepted are, for a refused field, the values (as compact JSON)
	// accepted besides an empty one: the kubelet's default.
	accepted []string
	// note says where a mapped field goes, or why a field is ignored or
	// refused; docs/kubeadm.md shows it.
	note string
}

// kubeletFields is every top-level field of KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1) and what nodelet does with it. A test
// checks that the list is complete for the vendored types, and
// docs/kubeadm.md shows the same table.
var kubeletFields = []kubeletField{
	{name: "enableServer", support: mapped, note: "false sets server.port to 0"},
	{name: "staticPodPath", support: mapped},
	{name: "podLogsDir", support: mapped},
	{name: "syncFrequency", support: mapped},
	{name: "fileCheckFrequency", support: mapped},
	{name: "httpCheckFrequency", support: mapped},
	{name: "staticPodURL", support: mapped},
	{name: "staticPodURLHeader", support: mapped},
	{name: "address", support: mapped, note: "server.address"},
	{name: "port", support: mapped, note: "server.port"},
	{name: "readOnlyPort", support: mapped, note: "server.readOnlyPort"},
	{name: "tlsCertFile", support: mapped, note: "server.tlsCertFile"},
	{name: "tlsPrivateKeyFile", support: mapped, note: "server.tlsPrivateKeyFile"},
	{name: "tlsCipherSuites", support: mapped, note: "server.tlsCipherSuites"},
	{name: "tlsCurvePreferences", support: mapped, note: "server.tlsCurvePreferences"},
	{name: "tlsMinVersion", support: mapped, note: "server.tlsMinVersion"},
	{name: "rotateCertificates", support: mapped},
	{name: "serverTLSBootstrap", support: mapped},
	{name: "authentication", support: mapped, note: "x509.clientCAFile, webhook and anonymous to server.clientCAFile, server.webhook, server.anonymous"},
	{name: "authorization", support: mapped, note: "server.authorization"},
	{name: "registryPullQPS", support: mapped},
	{name: "registryBurst", support: mapped},
	{name: "imagePullCredentialsVerificationPolicy", support: mapped},
	{name: "preloadedImagesVerificationAllowlist", support: mapped},
	{name: "eventRecordQPS", support: ignored, note: "events share the API client's rate limit"},
	{name: "eventBurst", support: ignored, note: "events share the API client's rate limit"},
	{name: "enableDebuggingHandlers", support: refused, accepted: []string{"true"}, note: "exec, attach, port-forward and logs are always served"},
	{name: "enableContentionProfiling", support: refused, accepted: []string{"false"}, note: "no contention profiling"},
	{name: "healthzPort", support: mapped, note: "with healthzBindAddress, healthzBindAddress host:port; 0 disables"},
	{name: "healthzBindAddress", support: mapped},
	{name: "oomScoreAdj", support: ignored, note: "nodelet's own OOM score is the unit's (OOMScoreAdjust)"},
	{name: "clusterDomain", support: mapped},
	{name: "clusterDNS", support: mapped},
	{name: "streamingConnectionIdleTimeout", support: mapped},
	{name: "nodeStatusUpdateFrequency", support: mapped},
	{name: "nodeStatusReportFrequency", support: mapped},
	{name: "nodeLeaseDurationSeconds", support: mapped},
	{name: "imageMinimumGCAge", support: mapped},
	{name: "imageMaximumGCAge", support: mapped},
	{name: "imageGCHighThresholdPercent", support: mapped},
	{name: "imageGCLowThresholdPercent", support: mapped},
	{name: "volumeStatsAggPeriod", support: mapped, note: "a negative value disables volume stats (0 in nodelet's configuration)"},
	{name: "kubeletCgroups", support: warned, note: "nodelet stays in the cgroup its unit started it in"},
	{name: "systemCgroups", support: warned, note: "nodelet moves no system processes"},
	{name: "cgroupRoot", support: mapped},
	{name: "cgroupsPerQOS", support: mapped},
	{name: "cgroupDriver", support: mapped},
	{name: "cpuManagerPolicy", support: refused, accepted: []string{`"none"`}, note: "no CPU manager"},
	{name: "singleProcessOOMKill", support: refused, note: "an OOM kill ends the whole container on cgroup v2 (memory.oom.group), the kubelet's default"},
	{name: "cpuManagerPolicyOptions", support: refused, note: "no CPU manager"},
	{name: "cpuManagerReconcilePeriod", support: ignored, note: "no CPU manager to reconcile"},
	{name: "memoryManagerPolicy", support: refused, accepted: []string{`"None"`}, note: "no memory manager"},
	{name: "topologyManagerPolicy", support: refused, accepted: []string{`"none"`}, note: "no topology manager"},
	{name: "topologyManagerScope", support: refused, accepted: []string{`"container"`}, note: "no topology manager"},
	{name: "topologyManagerPolicyOptions", support: refused, note: "no topology manager"},
	{name: "qosReserved", support: refused, note: "no memory QoS reservation"},
	{name: "runtimeRequestTimeout", support: mapped},
	{name: "hairpinMode", support: ignored, note: "hairpin traffic is the CNI plugin's"},
	{name: "maxPods", support: mapped},
	{name: "podCIDR", support: mapped, note: "handed to the runtime while the Node has no spec.podCIDRs"},
	{name: "podPidsLimit", support: mapped},
	{name: "resolvConf", support: mapped},
	{name: "runOnce", support: refused, accepted: []string{"false"}, note: "no run-once mode"},
	{name: "cpuCFSQuota", support: mapped},
	{name: "cpuCFSQuotaPeriod", support: mapped},
	{name: "nodeStatusMaxImages", support: refused, accepted: []string{"50"}, note: "the Node lists its 50 largest images"},
	{name: "maxOpenFiles", support: ignored, note: "the unit's LimitNOFILE sets it"},
	{name: "contentType", support: ignored, note: "the API client's content type is nodelet's choice"},
	{name: "kubeAPIQPS", support: mapped},
	{name: "kubeAPIBurst", support: mapped},
	{name: "serializeImagePulls", support: mapped},
	{name: "maxParallelImagePulls", support: mapped},
	{name: "evictionHard", support: mapped},
	{name: "evictionSoft", support: mapped},
	{name: "evictionSoftGracePeriod", support: mapped},
	{name: "evictionPressureTransitionPeriod", support: mapped},
	{name: "evictionMaxPodGracePeriod", support: mapped},
	{name: "evictionMinimumReclaim", support: mapped},
	{name: "mergeDefaultEvictionSettings", support: refused, accepted: []string{"false"}, note: "evictionHard replaces the default thresholds"},
	{name: "podsPerCore", support: refused, note: "maxPods alone bounds the pods"},
	{name: "enableControllerAttachDetach", support: refused, accepted: []string{"true"}, note: "the attach/detach controller attaches volumes"},
	{name: "protectKernelDefaults", support: mapped, note: "true refuses to start on other kernel settings; false leaves them as they are (the kubelet sets them)"},
	{name: "makeIPTablesUtilChains", support: ignored, note: "iptables chains are the proxy's"},
	{name: "iptablesMasqueradeBit", support: ignored, note: "iptables chains are the proxy's"},
	{name: "iptablesDropBit", support: ignored, note: "iptables chains are the proxy's"},
	{name: "featureGates", support: mapped, note: "every gate the kubelet knows, at its stage and default; a gate nodelet does not implement, set against its default, is logged as a warning; an unknown gate is refused by name"},
	{name: "failSwapOn", support: mapped},
	{name: "memorySwap", support: mapped, note: "swapBehavior: NoSwap, or LimitedSwap (cgroup v2)"},
	{name: "containerLogMaxSize", support: mapped},
	{name: "containerLogMaxFiles", support: mapped},
	{name: "containerLogMaxWorkers", support: mapped},
	{name: "containerLogMonitorInterval", support: mapped},
	{name: "configMapAndSecretChangeDetectionStrategy", support: mapped},
	{name: "systemReserved", support: mapped},
	{name: "kubeReserved", support: mapped},
	{name: "reservedSystemCPUs", support: refused, note: "no CPU manager"},
	{name: "showHiddenMetricsForVersion", support: refused, note: "no hidden metrics"},
	{name: "systemReservedCgroup", support: mapped},
	{name: "kubeReservedCgroup", support: mapped},
	{name: "enforceNodeAllocatable", support: mapped},
	{name: "allowedUnsafeSysctls", support: mapped},
	{name: "defaultPodSysctls", support: refused, note: "pods get only the sysctls they ask for"},
	{name: "volumePluginDir", support: ignored, note: "no FlexVolume plugins"},
	{name: "providerID", support: mapped},
	{name: "kernelMemcgNotification", support: refused, accepted: []string{"false"}, note: "memory is measured on the eviction interval"},
	{name: "logging", support: mapped},
	{name: "enableSystemLogHandler", support: ignored, note: "the node API does not serve /logs/"},
	{name: "enableSystemLogQuery", support: refused, accepted: []string{"false"}, note: "the node API does not serve /logs/"},
	{name: "shutdownGracePeriod", support: mapped},
	{name: "shutdownGracePeriodCriticalPods", support: mapped},
	{name: "shutdownGracePeriodByPodPriority", support: mapped},
	{name: "crashLoopBackOff", support: mapped},
	{name: "reservedMemory", support: refused, note: "no memory manager"},
	{name: "enableProfilingHandler", support: mapped},
	{name: "enableDebugFlagsHandler", support: ignored, note: "no /debug/flags/v handler; -v sets the verbosity"},
	{name: "seccompDefault", support: mapped},
	{name: "memoryThrottlingFactor", support: mapped, note: "with the MemoryQoS gate (cgroup v2)"},
	{name: "memoryReservationPolicy", support: mapped, note: "with the MemoryQoS gate (cgroup v2)"},
	{name: "registerWithTaints", support: mapped},
	{name: "registerNode", support: refused, accepted: []string{"true"}, note: "nodelet always registers its Node"},
	{name: "tracing", support: mapped},
	{name: "localStorageCapacityIsolation", support: mapped},
	{name: "containerRuntimeEndpoint", support: mapped},
	{name: "imageServiceEndpoint", support: mapped},
	{name: "failCgroupV1", support: ignored, note: "nodelet runs on cgroup v1 and v2"},
	{name: "userNamespaces", support: refused, note: "user namespaces get the runtime's default ID range"},
}
