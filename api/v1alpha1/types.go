package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
)

// ChangeDetectionStrategy says how nodelet notices changes to the ConfigMaps
// and Secrets its pods reference.
type ChangeDetectionStrategy string

const (
	// WatchChangeDetectionStrategy opens one watch per referenced object, by name.
	WatchChangeDetectionStrategy ChangeDetectionStrategy = "Watch"
	// GetChangeDetectionStrategy reads the object from the API server on every sync.
	GetChangeDetectionStrategy ChangeDetectionStrategy = "Get"
	// CacheChangeDetectionStrategy reads the object from the API server when
	// the copy read before is older than ConfigMapAndSecretCacheTTL.
	CacheChangeDetectionStrategy ChangeDetectionStrategy = "Cache"
)

// +kubebuilder:object:root=true

// NodeletConfiguration is the configuration of one nodelet, read from the file
// given with --config. Command-line flags that are set override the file.
type NodeletConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// NodeName is the name of the Node this agent runs. Defaults to the
	// NODE_NAME environment variable, else the host name, lower-cased.
	NodeName string `json:"nodeName,omitempty"`
	// NodeIP is the address reported as the Node's InternalIP. Detected from
	// the host when empty.
	NodeIP string `json:"nodeIP,omitempty"`
	// PodCIDR is the CIDR of this node's pod IPs (two, comma-separated, one
	// per IP family, for dual stack), handed to the container runtime with
	// CRI UpdateRuntimeConfig while the Node has no spec.podCIDRs: the
	// kubelet's podCIDR, for a node without an API server. The Node's
	// pod CIDRs, given by the control plane, win once it has them.
	PodCIDR string `json:"podCIDR,omitempty"`

	// ContainerRuntimeEndpoint is the CRI runtime service endpoint.
	// Default: unix:///run/containerd/containerd.sock.
	ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint,omitempty"`
	// ImageServiceEndpoint is the CRI image service endpoint. Defaults to
	// ContainerRuntimeEndpoint.
	ImageServiceEndpoint string `json:"imageServiceEndpoint,omitempty"`
	// RuntimeRequestTimeout bounds every CRI call but image pulls. Default: 2m.
	RuntimeRequestTimeout metav1.Duration `json:"runtimeRequestTimeout,omitempty"`
	// SerializeImagePulls pulls one image at a time when true. Default: true.
	SerializeImagePulls *bool `json:"serializeImagePulls,omitempty"`
	// MaxParallelImagePulls bounds the pulls running at once when they are
	// not serialized; nil: no bound. At least 1, and at most 1 with
	// SerializeImagePulls.
	MaxParallelImagePulls *int32 `json:"maxParallelImagePulls,omitempty"`
	// RegistryPullQPS bounds image pulls per second; a pull beyond it
	// fails at once (ErrImagePull, "pull QPS exceeded") and is retried
	// after the image pull back-off, as the kubelet's. 0: no bound.
	// Default: 5.
	RegistryPullQPS *int32 `json:"registryPullQPS,omitempty"`
	// RegistryBurst is how many pulls may go beyond RegistryPullQPS at
	// once. Default: 10.
	RegistryBurst *int32 `json:"registryBurst,omitempty"`
	// ImagePullCredentialsVerificationPolicy decides, as the kubelet's,
	// when a pod must prove with its own credentials that it may use an
	// image already on the node: NeverVerify (never), NeverVerifyPreloadedImages
	// (only images nodelet pulled: a pod may use one pulled with a pull
	// secret only with that secret's credential, or one pulled with a
	// service account's token only as that account),
	// NeverVerifyAllowlistedImages (every image but those of
	// PreloadedImagesVerificationAllowlist) or AlwaysVerify. Proving means
	// pulling again with the pod's credentials; with pull policy Never the
	// container fails as if the image were absent. Records are kept in
	// <rootDir>/image_manager. Default: NeverVerifyPreloadedImages.
	ImagePullCredentialsVerificationPolicy string `json:"imagePullCredentialsVerificationPolicy,omitempty"`
	// PreloadedImagesVerificationAllowlist are the images that
	// NeverVerifyAllowlistedImages does not verify: repositories without
	// tag or digest ("registry.k8s.io/pause"), or a prefix ending in "/*"
	// ("registry.example.com/base/*").
	PreloadedImagesVerificationAllowlist []string `json:"preloadedImagesVerificationAllowlist,omitempty"`

	// RootDir holds nodelet's state: checkpoints and pod directories.
	// Default: /var/lib/nodelet.
	RootDir string `json:"rootDir,omitempty"`
	// PodLogsDir holds container logs as <ns>_<name>_<uid>/<container>/<n>.log.
	// Default: /var/log/pods.
	PodLogsDir string `json:"podLogsDir,omitempty"`
	// HostRoot is where the host's root filesystem is seen: the Node's
	// machineID and osImage are read from <hostRoot>/etc/machine-id and
	// <hostRoot>/etc/os-release (else <hostRoot>/usr/lib/os-release), and
	// hostPath volumes (inline and PVs) and local PVs are type-checked,
	// created (DirectoryOrCreate, FileOrCreate) and opened for a subPath
	// under it, their symbolic links resolved as on the host (an absolute
	// link /etc/x is <hostRoot>/etc/x). The runtime, on the host, is
	// handed the host's own paths. A DaemonSet mounts the host's / at
	// /host (writable, mountPropagation HostToContainer) and sets /host;
	// RootDir must then be the same path in the container and on the
	// host. The boot ID and system UUID are the kernel's and are read from
	// /proc and /sys as they are. Default: "/" (nothing translated).
	HostRoot string `json:"hostRoot,omitempty"`
	// CgroupRoot is the cgroup under which pods run. With cgroupsPerQOS it
	// holds the kubepods cgroup ("" means "/"); without, it is the cgroup
	// parent of every sandbox, and empty lets the runtime choose.
	CgroupRoot string `json:"cgroupRoot,omitempty"`
	// CgroupsPerQOS makes the kubelet's cgroup tree: kubepods under
	// cgroupRoot, burstable and besteffort under it, and one cgroup per pod
	// bounded by the pod's resources. Default: true.
	CgroupsPerQOS *bool `json:"cgroupsPerQOS,omitempty"`
	// CgroupDriver is how cgroups are named and made: cgroupfs (paths) or
	// systemd (slices). It must match the runtime's. Default: cgroupfs.
	CgroupDriver string `json:"cgroupDriver,omitempty"`
	// PodPidsLimit caps the processes of one pod; -1 is no limit.
	// Default: -1.
	PodPidsLimit *int64 `json:"podPidsLimit,omitempty"`
	// CPUCFSQuota enforces CPU limits with a CFS quota; false leaves them
	// unenforced (requests still set shares), as the kubelet's. Default:
	// true.
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
	// CPUCFSQuotaPeriod is the CFS period of the pods' and containers'
	// quotas, from 1ms to 1s. Default: 100ms.
	CPUCFSQuotaPeriod *metav1.Duration `json:"cpuCFSQuotaPeriod,omitempty"`
	// FailSwapOn refuses to start when the node has swap on (/proc/swaps
	// lists a swap area), as the kubelet's field. Default: true.
	FailSwapOn *bool `json:"failSwapOn,omitempty"`
	// MemorySwap is the swap the containers may use, as the kubelet's
	// field.
	MemorySwap MemorySwapConfiguration `json:"memorySwap,omitempty"`
	// MemoryThrottlingFactor, with the MemoryQoS feature gate on a cgroup
	// v2 host, sets each container's memory.high between its memory
	// request and its limit (or the node's allocatable memory):
	// request + factor × (limit − request), rounded down to a page. More
	// than 0, at most 1. Unset: no memory.high, as the kubelet's default.
	MemoryThrottlingFactor *float64 `json:"memoryThrottlingFactor,omitempty"`
	// MemoryReservationPolicy, with the MemoryQoS feature gate on a cgroup
	// v2 host, says which memory requests the kernel protects from reclaim:
	// None (no memory.min or memory.low) or TieredReservation (memory.min
	// for Guaranteed pods and containers, memory.low for Burstable ones,
	// and their sums on the QoS cgroups). Default: None.
	MemoryReservationPolicy string `json:"memoryReservationPolicy,omitempty"`
	// EnforceNodeAllocatable lists what is bounded by the node's
	// allocatable and reservations: "pods" (the kubepods cgroup),
	// "system-reserved" and "kube-reserved" (the cgroups named by
	// systemReservedCgroup and kubeReservedCgroup), or "none" alone.
	// Default: ["pods"] with cgroupsPerQOS, else none.
	EnforceNodeAllocatable []string `json:"enforceNodeAllocatable,omitempty"`
	// SystemReservedCgroup is the cgroup of the system's daemons, bounded by
	// systemReserved when enforceNodeAllocatable has system-reserved.
	SystemReservedCgroup string `json:"systemReservedCgroup,omitempty"`
	// KubeReservedCgroup is the cgroup of the node agents, bounded by
	// kubeReserved when enforceNodeAllocatable has kube-reserved.
	KubeReservedCgroup string `json:"kubeReservedCgroup,omitempty"`

	// ContainerLogMaxSize is the size at which a container's log is
	// rotated, as a quantity. Default: 10Mi.
	ContainerLogMaxSize string `json:"containerLogMaxSize,omitempty"`
	// ContainerLogMaxFiles is how many log files a container keeps, the one
	// being written included; at least 2. Default: 5.
	ContainerLogMaxFiles int32 `json:"containerLogMaxFiles,omitempty"`
	// ContainerLogMaxWorkers is how many containers' logs are rotated at
	// once. Default: 1.
	ContainerLogMaxWorkers int32 `json:"containerLogMaxWorkers,omitempty"`
	// ContainerLogMonitorInterval is how often log sizes are checked; at
	// least 3s. Default: 10s.
	ContainerLogMonitorInterval metav1.Duration `json:"containerLogMonitorInterval,omitempty"`
	// ContainerLogLinksDir holds the <pod>_<namespace>_<container>-<id>.log
	// links to each container's current log, which log shippers read.
	// Empty disables them. Default: /var/log/containers.
	ContainerLogLinksDir *string `json:"containerLogLinksDir,omitempty"`

	// ContainerGC is the policy for dead containers and sandboxes.
	ContainerGC ContainerGCPolicy `json:"containerGC,omitempty"`

	// ImageGCHighThresholdPercent is the image filesystem usage, in percent,
	// above which unused images are removed; 100 disables image GC by
	// usage. Default: 85.
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is the usage image GC brings the image
	// filesystem down to. Default: 80.
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// ImageMinimumGCAge is how long an image stays unused before it may be
	// removed. Default: 2m.
	ImageMinimumGCAge metav1.Duration `json:"imageMinimumGCAge,omitempty"`
	// ImageMaximumGCAge removes an image unused for this long whatever the
	// usage; 0 disables. Default: 0.
	ImageMaximumGCAge metav1.Duration `json:"imageMaximumGCAge,omitempty"`
	// ImageGCPeriod is how often image GC runs. Default: 5m, as the kubelet.
	ImageGCPeriod metav1.Duration `json:"imageGCPeriod,omitempty"`

	// VolumeStatsAggPeriod is how often each pod's volumes are measured for
	// /stats/summary and the kubelet_volume_stats_* metrics, as the
	// kubelet's field of the same name; 0 disables the measuring.
	// Default: 1m.
	VolumeStatsAggPeriod *metav1.Duration `json:"volumeStatsAggPeriod,omitempty"`

	// StaticPodPath is a directory of pod manifests (or one manifest file)
	// that nodelet runs as static pods, with or without an API server, as
	// the kubelet's field of the same name. Files whose name starts with a
	// dot are ignored. Empty: no manifest directory.
	StaticPodPath string `json:"staticPodPath,omitempty"`
	// FileCheckFrequency is how often staticPodPath is read again besides
	// the change notifications. Default: 20s.
	FileCheckFrequency metav1.Duration `json:"fileCheckFrequency,omitempty"`
	// StaticPodURL is an http(s) URL serving a pod or a PodList that
	// nodelet runs as static pods. Empty: none.
	StaticPodURL string `json:"staticPodURL,omitempty"`
	// StaticPodURLHeader are the HTTP headers of the requests to
	// staticPodURL.
	StaticPodURLHeader map[string][]string `json:"staticPodURLHeader,omitempty"`
	// HTTPCheckFrequency is how often staticPodURL is read. Default: 20s.
	HTTPCheckFrequency metav1.Duration `json:"httpCheckFrequency,omitempty"`

	// MaxPods is the number of pods this node runs at most. Default: 110.
	MaxPods int32 `json:"maxPods,omitempty"`
	// NodeLabels are added to the Node when nodelet registers it.
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// RegisterWithTaints are added to the Node when nodelet registers it
	// (the kubelet's field of the same name and shape): key, value, effect.
	// Only pods that tolerate them are scheduled to, and admitted on, the
	// node. timeAdded is set by the control plane and must be empty.
	RegisterWithTaints []corev1.Taint `json:"registerWithTaints,omitempty"`

	// NodeStatusUpdateFrequency is how often the Node status is computed. Default: 10s.
	NodeStatusUpdateFrequency metav1.Duration `json:"nodeStatusUpdateFrequency,omitempty"`
	// NodeStatusReportFrequency is how often an unchanged Node status is
	// written anyway. Default: 5m.
	NodeStatusReportFrequency metav1.Duration `json:"nodeStatusReportFrequency,omitempty"`
	// NodeLeaseDurationSeconds is the lease duration of the node heartbeat;
	// it is renewed every quarter of it. Default: 40.
	NodeLeaseDurationSeconds int32 `json:"nodeLeaseDurationSeconds,omitempty"`
	// SyncFrequency is the longest time between two syncs of a running pod. Default: 1m.
	SyncFrequency metav1.Duration `json:"syncFrequency,omitempty"`
	// RelistPeriod is how often the runtime is listed for container changes.
	// With containerd, whose events report a container's exit, the runtime
	// is listed at each such event, no more often than this, and every 10s
	// (or this, if longer) otherwise. Default: 1s.
	RelistPeriod metav1.Duration `json:"relistPeriod,omitempty"`
	// CrashLoopBackOff tunes the delay between restarts of a crashing
	// container, as the kubelet's field of the same name.
	CrashLoopBackOff CrashLoopBackOffConfig `json:"crashLoopBackOff,omitempty"`

	// SystemReserved is held back from allocatable for the system (cpu, memory,
	// ephemeral-storage, pid), as resource quantities.
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// KubeReserved is held back from allocatable for the node agents.
	KubeReserved map[string]string `json:"kubeReserved,omitempty"`
	// EvictionHard are the hard eviction thresholds, as quantities or
	// percentages. Default: memory.available 100Mi, nodefs.available 10%,
	// nodefs.inodesFree 5%, imagefs.available 15%.
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// EvictionSoft are thresholds that evict only after they have held for
	// their grace period in EvictionSoftGracePeriod.
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod is, per soft threshold's signal, how long it
	// must hold before pods are evicted, as a duration ("1m30s").
	EvictionSoftGracePeriod map[string]string `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod caps, in seconds, the termination grace
	// period of a pod evicted for a soft threshold; a hard threshold stops
	// pods with a 1s grace period. Default: 0.
	EvictionMaxPodGracePeriod int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// EvictionMinimumReclaim is, per signal, how much more than the
	// threshold a reclaim must free before it stops.
	EvictionMinimumReclaim map[string]string `json:"evictionMinimumReclaim,omitempty"`
	// EvictionPressureTransitionPeriod is how long a pressure condition
	// stays after its threshold is no longer met. Default: 5m.
	EvictionPressureTransitionPeriod metav1.Duration `json:"evictionPressureTransitionPeriod,omitempty"`
	// EvictionMonitoringInterval is how often the eviction signals are
	// measured. Default: 10s, as the kubelet's housekeeping.
	EvictionMonitoringInterval metav1.Duration `json:"evictionMonitoringInterval,omitempty"`
	// LocalStorageCapacityIsolation evicts a pod that writes past an
	// emptyDir sizeLimit or a container's ephemeral-storage limit.
	// Default: true.
	LocalStorageCapacityIsolation *bool `json:"localStorageCapacityIsolation,omitempty"`

	// ShutdownGracePeriod is how long the node's shutdown is delayed, with
	// a systemd-logind "delay" inhibitor lock, for its pods to stop, as the
	// kubelet's field (feature gate GracefulNodeShutdown): when logind
	// announces the shutdown, the node turns NotReady, new pods are
	// rejected, and the running ones are stopped, those below
	// system-cluster-critical priority first. 0 or at least 1s; 0 lets
	// the node go down at once. Default: 0.
	ShutdownGracePeriod metav1.Duration `json:"shutdownGracePeriod,omitempty"`
	// ShutdownGracePeriodCriticalPods is the part of ShutdownGracePeriod
	// kept for the pods of system-cluster-critical priority or above, which
	// stop last. At most ShutdownGracePeriod; 0 or at least 1s. Default: 0.
	ShutdownGracePeriodCriticalPods metav1.Duration `json:"shutdownGracePeriodCriticalPods,omitempty"`
	// ShutdownGracePeriodByPodPriority, in place of the two fields above
	// (feature gate GracefulNodeShutdownBasedOnPodPriority), gives each
	// range of pod priorities its own grace period: a pod belongs to the
	// entry of the highest priority at or below its own (the lowest entry
	// when its priority is below all), the groups stop from the lowest
	// priority up, and the node's shutdown is delayed by the sum of the
	// periods. Empty: the two fields above decide.
	ShutdownGracePeriodByPodPriority []ShutdownGracePeriodByPodPriority `json:"shutdownGracePeriodByPodPriority,omitempty"`

	// ConfigMapAndSecretChangeDetectionStrategy is Watch, Cache or Get. Default: Watch.
	ConfigMapAndSecretChangeDetectionStrategy ChangeDetectionStrategy `json:"configMapAndSecretChangeDetectionStrategy,omitempty"`
	// ConfigMapAndSecretCacheTTL is how long the Cache strategy uses an object
	// it read before reading it again. Default: 1m, as the kubelet's.
	ConfigMapAndSecretCacheTTL metav1.Duration `json:"configMapAndSecretCacheTTL,omitempty"`

	// ClusterDNS are the DNS server addresses given to ClusterFirst pods.
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// ClusterDomain is the cluster's DNS domain. Default: cluster.local.
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// ResolvConf is the resolver file pods with dnsPolicy Default inherit.
	// Default: /etc/resolv.conf. Empty string disables it.
	ResolvConf *string `json:"resolvConf,omitempty"`

	// Server is the node agent API (logs, exec, configz, healthz).
	Server ServerConfig `json:"server,omitempty"`
	// HealthzBindAddress serves /healthz and /readyz; "0" disables. Default: 127.0.0.1:10248.
	HealthzBindAddress string `json:"healthzBindAddress,omitempty"`
	// MetricsBindAddress serves /metrics, without authentication, besides
	// the node API's authorized /metrics; "0" disables. Default: "0" (the
	// kubelet has no such listener, and kube-proxy's metrics port is
	// 127.0.0.1:10249).
	MetricsBindAddress string `json:"metricsBindAddress,omitempty"`

	// KubeAPIQPS is the steady rate of requests to the API server; a negative
	// value disables client-side rate limiting, 0 is refused. Default: 50, as
	// the kubelet's.
	KubeAPIQPS *float32 `json:"kubeAPIQPS,omitempty"`
	// KubeAPIBurst is the largest burst of requests to the API server.
	// Default: 100, as the kubelet's.
	KubeAPIBurst int32 `json:"kubeAPIBurst,omitempty"`

	// RotateCertificates requests a new client certificate (a CSR to the
	// signer kubernetes.io/kube-apiserver-client-kubelet) before the
	// current one expires, and switches to it without a restart. Default:
	// true with --bootstrap-kubeconfig, else false.
	RotateCertificates *bool `json:"rotateCertificates,omitempty"`

	// ServerTLSBootstrap requests the node API's serving certificate from
	// the cluster (a CSR to the signer kubernetes.io/kubelet-serving, for the
	// node's name and addresses) instead of making a self-signed one, and
	// renews it before it expires. Ignored when server.tlsCertFile is set.
	// Default: false.
	ServerTLSBootstrap bool `json:"serverTLSBootstrap,omitempty"`

	// StreamingConnectionIdleTimeout ends an exec, attach or port-forward
	// session that carried no data for this long. Default: 4h.
	StreamingConnectionIdleTimeout metav1.Duration `json:"streamingConnectionIdleTimeout,omitempty"`

	// Tracing exports OpenTelemetry spans over OTLP gRPC, as the kubelet's
	// tracing block: a syncPod span for each pod sync and a span for each
	// CRI call under it (the trace context passed on to the runtime).
	// endpoint defaults to localhost:4317; samplingRatePerMillion to 0
	// (only spans whose parent is sampled). None: no tracing.
	Tracing *tracingapi.TracingConfiguration `json:"tracing,omitempty"`

	// EnableProfilingHandler serves Go's /debug/pprof on the node API
	// (authorized as nodes/proxy) and, when MetricsBindAddress is a
	// loopback address, on it too; its heap profiles hold what was
	// allocated after start-up.
	// Default: false.
	EnableProfilingHandler bool `json:"enableProfilingHandler,omitempty"`

	// AllowedUnsafeSysctls are the sysctls, or prefixes ending in "*", that
	// pods may set besides the safe ones (kernel.shm_rmid_forced,
	// net.ipv4.ip_local_port_range, ...). Only sysctls the kernel namespaces
	// per pod are accepted: kernel.shm*, kernel.msg*, kernel.sem,
	// fs.mqueue.*, net.*. A pod setting any other sysctl is rejected.
	AllowedUnsafeSysctls []string `json:"allowedUnsafeSysctls,omitempty"`
	// SeccompDefault runs containers whose pod and container security
	// contexts name no seccomp profile with the runtime's default profile
	// (RuntimeDefault) instead of Unconfined, as the kubelet's field.
	// Default: false.
	SeccompDefault bool `json:"seccompDefault,omitempty"`
	// ImageCredentialProviderConfig is the kubelet's
	// CredentialProviderConfig (a file, or a directory of them): the image
	// credential provider plugins that give registry credentials for the
	// images they match, tried after a pod's pull secrets. Empty: none.
	ImageCredentialProviderConfig string `json:"imageCredentialProviderConfig,omitempty"`
	// ImageCredentialProviderBinDir holds the plugins' binaries.
	ImageCredentialProviderBinDir string `json:"imageCredentialProviderBinDir,omitempty"`
	// ProtectKernelDefaults refuses to start unless the kernel's settings
	// are those the kubelet expects (vm.overcommit_memory=1,
	// vm.panic_on_oom=0, kernel.panic=10, kernel.panic_on_oops=1,
	// kernel.keys.root_maxkeys=1000000, kernel.keys.root_maxbytes=25000000),
	// as the kubelet's field. False leaves them as they are (the kubelet
	// sets them). Default: false.
	ProtectKernelDefaults bool `json:"protectKernelDefaults,omitempty"`

	// Controllers lists the reconcilers to run: "*" for all, a name to add
	// one, "-name" to remove one. Default: ["*"].
	Controllers []string `json:"controllers,omitempty"`

	// ProviderID is the cloud provider's identifier of this machine, as
	// the kubelet's --provider-id: the Node's spec.providerID when nodelet
	// registers it.
	ProviderID string `json:"providerID,omitempty"`
	// PodInfraContainerImage is the sandbox ("pause") image, as the
	// kubelet's --pod-infra-container-image: the runtime chooses the image
	// it runs, and this one is never removed by image GC.
	PodInfraContainerImage string `json:"podInfraContainerImage,omitempty"`

	// FeatureGates turns the Kubernetes feature gates nodelet knows on or
	// off by name. An unknown name is refused.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// Logging is the log format, verbosity and per-file verbosity, as the
	// kubelet's logging block (k8s.io/component-base/logs). Default: text,
	// verbosity 0.
	Logging logsapi.LoggingConfiguration `json:"logging,omitempty"`
}

// ServerConfig configures the node agent API server.
type ServerConfig struct {
	// Address to listen on. Default: 0.0.0.0.
	Address string `json:"address,omitempty"`
	// Port to listen on; 0 disables the server. Default: 10250.
	Port *int32 `json:"port,omitempty"`
	// ReadOnlyPort, when not 0, also serves what the kubelet's read-only
	// port serves, on Address, in plain HTTP and without authentication
	// or authorization: /healthz, /pods (every pod of the node, with its
	// environment variables as written in the spec), /metrics,
	// /metrics/probes, /metrics/resource, /metrics/cadvisor and
	// /stats/summary. Off by
	// default, as the kubelet's; turn it on only on a network no one
	// untrusted reaches.
	ReadOnlyPort int32 `json:"readOnlyPort,omitempty"`
	// TLSCertFile and TLSPrivateKeyFile are the serving certificate; when
	// both are empty a self-signed one is made under RootDir.
	TLSCertFile       string `json:"tlsCertFile,omitempty"`
	TLSPrivateKeyFile string `json:"tlsPrivateKeyFile,omitempty"`
	// TLSCipherSuites are the cipher suites the node API offers with TLS 1.2,
	// by the names of Go's crypto/tls constants (TLS 1.3 suites are not
	// configurable). Empty: Go's defaults.
	TLSCipherSuites []string `json:"tlsCipherSuites,omitempty"`
	// TLSMinVersion is the oldest TLS version the node API accepts:
	// VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13. Default:
	// VersionTLS12.
	TLSMinVersion string `json:"tlsMinVersion,omitempty"`
	// TLSCurvePreferences are the key exchange mechanisms the node API
	// allows, by the numbers of Go's tls.CurveID (23 P-256, 24 P-384, 25
	// P-521, 29 X25519, 4588 X25519MLKEM768, ...); Go chooses among them in
	// its own order. Empty: Go's defaults.
	TLSCurvePreferences []int32 `json:"tlsCurvePreferences,omitempty"`
	// ClientCAFile authenticates clients by certificate: a client
	// certificate signed by one of its CAs names the user (common name) and
	// groups (organizations). Empty: no certificate authentication. The
	// file is read again when it changes.
	ClientCAFile string `json:"clientCAFile,omitempty"`
	// IdleTimeout closes a connection that has no request in flight for
	// this long. Default: 2m.
	IdleTimeout metav1.Duration `json:"idleTimeout,omitempty"`
	// Anonymous lets requests without credentials through as
	// system:anonymous (group system:unauthenticated), still subject to
	// authorization. Off by default: they get 401. Refused with
	// authorization mode AlwaysAllow, which would let anyone exec into
	// every pod.
	Anonymous AnonymousAuthentication `json:"anonymous,omitempty"`
	// Webhook authenticates bearer tokens with TokenReviews.
	Webhook WebhookAuthentication `json:"webhook,omitempty"`
	// Authorization decides what an authenticated user may do.
	Authorization ServerAuthorization `json:"authorization,omitempty"`
}

// AnonymousAuthentication configures requests without credentials.
type AnonymousAuthentication struct {
	// Enabled lets them through as system:anonymous. Default: false.
	Enabled bool `json:"enabled,omitempty"`
}

// WebhookAuthentication configures bearer token authentication by
// TokenReview.
type WebhookAuthentication struct {
	// Enabled checks bearer tokens with the API server. Default: true.
	Enabled *bool `json:"enabled,omitempty"`
	// CacheTTL is how long a review's answer is reused; 0 reviews every
	// request. Default: 2m.
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
}

// Authorization modes of the node API.
const (
	// AuthorizationModeWebhook asks the API server with SubjectAccessReviews.
	AuthorizationModeWebhook = "Webhook"
	// AuthorizationModeAlwaysAllow allows every authenticated request.
	AuthorizationModeAlwaysAllow = "AlwaysAllow"
)

// ServerAuthorization configures the node API's authorization.
type ServerAuthorization struct {
	// Mode is Webhook or AlwaysAllow. Default: Webhook.
	Mode string `json:"mode,omitempty"`
	// CacheAuthorizedTTL is how long an allow is reused; 0 asks again on
	// every request. Default: 5m.
	CacheAuthorizedTTL *metav1.Duration `json:"cacheAuthorizedTTL,omitempty"`
	// CacheUnauthorizedTTL is how long a deny is reused; 0 asks again on
	// every request. Default: 30s.
	CacheUnauthorizedTTL *metav1.Duration `json:"cacheUnauthorizedTTL,omitempty"`
}

// MemorySwapConfiguration is the swap containers may use.
type MemorySwapConfiguration struct {
	// SwapBehavior is NoSwap (containers get no swap) or LimitedSwap
	// (Burstable pods' containers that request memory get a share of the
	// node's swap in proportion to their request; cgroup v2 only).
	// Default: NoSwap.
	SwapBehavior string `json:"swapBehavior,omitempty"`
}

// ShutdownGracePeriodByPodPriority is the shutdown grace period of the
// pods of a range of priorities, as the kubelet's type of the same name.
type ShutdownGracePeriodByPodPriority struct {
	// Priority is the lowest pod priority of the range; it reaches up to
	// the next entry's.
	Priority int32 `json:"priority"`
	// ShutdownGracePeriodSeconds is how long the range's pods get to stop.
	ShutdownGracePeriodSeconds int64 `json:"shutdownGracePeriodSeconds"`
}

// CrashLoopBackOffConfig tunes the crash-loop back-off.
type CrashLoopBackOffConfig struct {
	// MaxContainerRestartPeriod caps the delay between two restarts of a
	// crashing container, between 1s and 300s. The first delay is 10s, or
	// this cap when it is shorter. Default: 300s.
	MaxContainerRestartPeriod *metav1.Duration `json:"maxContainerRestartPeriod,omitempty"`
}

// ContainerGCPolicy is the kubelet's policy for dead containers.
type ContainerGCPolicy struct {
	// MinimumGCAge is how long a container stays dead before it may be
	// removed. Default: 0.
	MinimumGCAge metav1.Duration `json:"minimumGCAge,omitempty"`
	// MaxPerPodContainer is how many dead instances of each container of a
	// live pod are kept; the newest always stays (the container's
	// lastState and logs --previous read it). Default: 1.
	MaxPerPodContainer *int32 `json:"maxPerPodContainer,omitempty"`
	// MaxContainers is how many dead containers the node keeps in all; -1
	// is no limit. Default: -1.
	MaxContainers *int32 `json:"maxContainers,omitempty"`
	// Period is how often container GC runs. Default: 1m, as the kubelet.
	Period metav1.Duration `json:"period,omitempty"`
}
