// Package criconfig builds the CRI requests for a pod as the kubelet would:
// the sandbox configuration (log directory, hostname, DNS from the pod's
// policy and the node's resolver, port mappings, namespaces including the
// user namespace, sysctls, security context, and the pod's resources and
// overhead) and each container's configuration (environment from the
// downward API, ConfigMaps, Secrets and service links, with $(VAR)
// expansion, cgroup resources and OOM score from the pod's QoS class, huge
// page limits, swap and MemoryQoS settings from the node's options (see
// ResourceOptions),
// security context with runAsNonRoot, seccomp and AppArmor, labels and
// annotations, mounts idmapped into a pod's own user namespace).
// CheckUserNamespace decides whether the runtime can give a pod with
// hostUsers: false the user namespace it asks for. Everything that takes
// I/O to find (referenced objects, the image's user, mounts, the node's
// resolver file, the runtime's features, a pod's user namespace IDs) is
// resolved by the caller and passed in; the package does no I/O itself.
// Errors the user must fix in the pod or its objects are *ConfigError.
package criconfig
