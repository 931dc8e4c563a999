package criconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Container annotations, with the kubelet's keys so that crictl users find
// what they are used to.
const (
	AnnotationRestartCount             = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPreStopHandler           = "io.kubernetes.container.preStopHandler"
	AnnotationPorts                    = "io.kubernetes.container.ports"
	AnnotationDeletionGracePeriod      = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationTerminationGracePeriod   = "io.kubernetes.pod.terminationGracePeriod"
)

// ConfigError is an error in a container's configuration that only a change
// of the pod or of the objects it references can fix: a missing ConfigMap,
// Secret or key, an unsupported downward API field, a runAsNonRoot check
// that cannot pass. Report it as the Waiting reason
// CreateContainerConfigError.
type ConfigError struct {
	Err error
}

func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// ContainerOptions is what ContainerConfig needs besides the pod and the
// container; everything that takes I/O to find is resolved by the caller.
type ContainerOptions struct {
	// RestartCount of the container to create (plan.ContainerStart.RestartCount).
	RestartCount uint32
	// SandboxID of the sandbox the container is created in.
	SandboxID string
	// PodIPs are the sandbox's IPs; HostIPs the node's. A host-network pod
	// without sandbox IPs gets the host IPs.
	PodIPs  []string
	HostIPs []string
	// Mounts are the container's volume mounts (and its termination message
	// file, /etc/hosts, ...), resolved by the caller.
	Mounts []*runtimeapi.Mount
	// Env is the container's environment as ContainerEnv resolves it with
	// these options, when the caller resolved it already to expand the
	// container's subPathExpr mounts with it; nil has ContainerConfig
	// resolve it.
	Env []EnvVar
	// DeviceEnv are the variables the device plugins' allocations give
	// the container. As the kubelet, $(VAR) in its command and args sees
	// them below the container's own variables; its own variables'
	// values do not see them.
	DeviceEnv map[string]string
	// ImageRef is the pulled image's reference (ID or digest).
	ImageRef string
	// ImageUID and ImageUser are the user of the image (from its status),
	// used for runAsNonRoot; both empty if unknown.
	ImageUID  *int64
	ImageUser string
	// ConfigMaps and Secrets referenced by the container's environment, by
	// name, as fetched; a name absent from the map was not found.
	ConfigMaps map[string]*v1.ConfigMap
	Secrets    map[string]*v1.Secret
	// ServiceEnv are the service link variables (KUBERNETES_SERVICE_HOST...).
	ServiceEnv map[string]string
	// NodeAllocatable gives the default limits for resourceFieldRef and the
	// node memory for the OOM score of burstable containers.
	NodeAllocatable v1.ResourceList
	// SeccompRoot is the directory of Localhost seccomp profiles.
	SeccompRoot string
	// OpenVolumeFile opens a file in one of the pod's emptyDir volumes,
	// for fileKeyRef env vars; nil (the EnvFiles gate off) sets such a
	// variable empty, as the kubelet does.
	OpenVolumeFile func(volume, path string) (io.ReadCloser, error)
	// SeccompDefault gives a container whose pod and container name no
	// seccomp profile RuntimeDefault instead of Unconfined.
	SeccompDefault bool
	// ExtraLabels are added to the container's labels (the ownership label).
	ExtraLabels map[string]string
	// TargetContainerID is the container whose process namespace an
	// ephemeral container shares (plan.ContainerStart.Target); empty
	// for others.
	TargetContainerID string
	// UserNamespace is the pod's user namespace, the one its sandbox was
	// created with; nil sends none.
	UserNamespace *runtimeapi.UserNamespace
	// Resources are the node's settings and facts the container's cgroup
	// settings depend on (see ContainerResources).
	Resources ResourceOptions
}

func (o *ContainerOptions) podIPs(pod *v1.Pod) []string {
	if len(o.PodIPs) == 0 && pod.Spec.HostNetwork {
		return o.HostIPs
	}
	return o.PodIPs
}

// ResolveEnv is ContainerEnv with its error naming the container: what
// ContainerConfig uses when opts.Env is not set yet.
func ResolveEnv(pod *v1.Pod, c *v1.Container, opts ContainerOptions) ([]EnvVar, error) {
	env, err := ContainerEnv(pod, c, opts)
	if err != nil {
		return nil, fmt.Errorf("building environment of container %s: %w", c.Name, err)
	}
	return env, nil
}

// ContainerConfig builds the CRI configuration of a container of the pod.
// Errors the user must fix are *ConfigError.
func ContainerConfig(pod *v1.Pod, c *v1.Container, opts ContainerOptions) (*runtimeapi.ContainerConfig, error) {
	env := opts.Env
	if env == nil {
		var err error
		if env, err = ResolveEnv(pod, c, opts); err != nil {
			return nil, err
		}
	}
	sc, err := containerSecurityContext(pod, c, opts)
	if err != nil {
		if ce := (*ConfigError)(nil); errors.As(err, &ce) {
			// Shown as is, as the kubelet's messages (they name the container).
			return nil, ce
		}
		return nil, fmt.Errorf("building security context of container %s: %w", c.Name, err)
	}
	lookup := func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if env[i].Name == name {
				return env[i].Value, true
			}
		}
		v, ok := opts.DeviceEnv[name]
		return v, ok
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: opts.RestartCount},
		Image:       &runtimeapi.ImageSpec{Image: imageOrRef(c, opts), UserSpecifiedImage: c.Image},
		Command:     expandAll(c.Command, lookup),
		Args:        expandAll(c.Args, lookup),
		WorkingDir:  c.WorkingDir,
		Envs:        runtimeEnv(env),
		Mounts:      opts.Mounts,
		Labels:      containerLabels(pod, c, opts),
		Annotations: containerAnnotations(pod, c, opts.RestartCount),
		LogPath:     ContainerLogPath(c.Name, opts.RestartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       ContainerResources(pod, c, opts.NodeAllocatable, opts.Resources),
			SecurityContext: sc,
		},
	}
	shareTargetPID(sc.NamespaceOptions, opts.TargetContainerID)
	cfg.Mounts = idmapMounts(cfg.Mounts, opts.UserNamespace)
	return cfg, nil
}

func imageOrRef(c *v1.Container, opts ContainerOptions) string {
	if opts.ImageRef != "" {
		return opts.ImageRef
	}
	return c.Image
}

func expandAll(in []string, lookup func(string) (string, bool)) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = podspec.ExpandVars(s, lookup)
	}
	return out
}

func runtimeEnv(env []EnvVar) []*runtimeapi.KeyValue {
	out := make([]*runtimeapi.KeyValue, len(env))
	for i, e := range env {
		out[i] = &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)}
	}
	return out
}

func containerLabels(pod *v1.Pod, c *v1.Container, opts ContainerOptions) map[string]string {
	labels := map[string]string{
		kubetypes.KubernetesPodNameLabel:       pod.Name,
		kubetypes.KubernetesPodNamespaceLabel:  pod.Namespace,
		kubetypes.KubernetesPodUIDLabel:        string(pod.UID),
		kubetypes.KubernetesContainerNameLabel: c.Name,
		state.ContainerHashLabel:               podspec.ContainerHash(c),
	}
	if opts.SandboxID != "" {
		labels[state.SandboxIDLabel] = opts.SandboxID
	}
	maps.Copy(labels, opts.ExtraLabels)
	return labels
}

func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount uint32) map[string]string {
	a := map[string]string{
		AnnotationRestartCount:             strconv.FormatUint(uint64(restartCount), 10),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if raw, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationPreStopHandler] = string(raw)
		}
	}
	if len(c.Ports) > 0 {
		if raw, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationPorts] = string(raw)
		}
	}
	return a
}

// shareTargetPID has an ephemeral container join the process namespace of
// the container targetID, when it would otherwise get one of its own (the
// pod neither shares one among its containers nor uses the host's).
func shareTargetPID(ns *runtimeapi.NamespaceOption, targetID string) {
	if targetID == "" || ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return
	}
	ns.Pid = runtimeapi.NamespaceMode_TARGET
	ns.TargetId = targetID
}
