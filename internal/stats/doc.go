// Package stats computes the node's resource usage summary, the answer of
// the node API's /stats/summary in the types of
// k8s.io/kubelet/pkg/apis/stats/v1alpha1, which the eviction manager reads
// too. A Provider takes the node's CPU, memory, network, filesystems and
// pressure stall information from the host's /proc, its root cgroup and
// statfs, and the pods' and containers' from the CRI stats calls (the
// runtime's pod-level stats where it has ListPodSandboxStats, else the sum
// of the containers and the network read from the sandbox's network
// namespace), with their volumes from the background measures of
// internal/volumestats (a VolumeStatsCache) and their logs and /etc/hosts
// counted in their ephemeral storage.
//
// The same Provider turns a fresh summary into the Prometheus families of
// /metrics/resource (what metrics-server reads) and, with the pods' specs
// and cgroups, /metrics/cadvisor (the container families of the kubelet's
// cAdvisor endpoint), each on a registry of its own, computed at every
// scrape; the node API only serves them.
package stats
