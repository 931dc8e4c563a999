// Package podspec reads a pod's spec the way the kubelet does, for every
// part of nodelet that needs it, not only the CRI requests: a container
// by name (ContainerSpec), the QoS class (PodQOS), the hostname and
// subdomain (PodHostnameAndDomain, PodHostname), a named port
// (ResolvePort), $(VAR) expansion (ExpandVars), downward API field and
// resource values (PodFieldValue, ResourceFieldValue), the service link
// variables (ServiceEnv), whether a volume mount is recursively read-only
// (RecursiveReadOnly), the container hash that tells a spec change
// (ContainerHash) and the kubelet's way to name a pod in messages
// (PodDesc). It is pure: no I/O, no CRI and nothing of nodelet imported.
package podspec
