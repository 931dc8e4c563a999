package deviceplugin

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// ApplyResponses adds what the plugins' Allocate responses give a container
// to its CRI config: their environment before the container's own (which
// wins), their mounts before the volumes', device nodes, annotations and
// CDI devices. Responses are applied in the order given.
func ApplyResponses(cfg *runtimeapi.ContainerConfig, responses []*pluginapi.ContainerAllocateResponse) {
	var envs []*runtimeapi.KeyValue
	var mounts []*runtimeapi.Mount
	for _, r := range responses {
		for _, k := range slices.Sorted(maps.Keys(r.GetEnvs())) {
			envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: []byte(r.GetEnvs()[k])})
		}
		for _, mt := range r.GetMounts() {
			mounts = append(mounts, &runtimeapi.Mount{ContainerPath: mt.GetContainerPath(), HostPath: mt.GetHostPath(), Readonly: mt.GetReadOnly()})
		}
		for _, d := range r.GetDevices() {
			cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: d.GetContainerPath(), HostPath: d.GetHostPath(), Permissions: d.GetPermissions()})
		}
		for k, v := range r.GetAnnotations() {
			if cfg.Annotations == nil {
				cfg.Annotations = map[string]string{}
			}
			cfg.Annotations[k] = v
		}
		for _, d := range r.GetCdiDevices() {
			cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: d.GetName()})
		}
	}
	cfg.Envs = append(envs, cfg.Envs...)
	cfg.Mounts = append(mounts, cfg.Mounts...)
}

// ContainerEnv returns the variables the plugins' Allocate responses give
// the container, a later resource's over an earlier one's as they are
// applied (ApplyResponses): what $(VAR) in its command and args sees
// besides its own variables. A container holding no devices has none.
func (m *Manager) ContainerEnv(pod *corev1.Pod, container string) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out map[string]string
	for _, k := range slices.SortedFunc(maps.Keys(m.assignments), func(a, b key) int { return cmpString(a.resource, b.resource) }) {
		if k.pod != pod.UID || k.container != container {
			continue
		}
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(m.assignments[k].AllocResp, resp); err != nil {
			return nil, fmt.Errorf("decoding the allocation of %s to container %s: %w", k.resource, container, err)
		}
		for name, v := range resp.GetEnvs() {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = v
		}
	}
	return out, nil
}

// ContainerDevices runs PreStartContainer for the container's devices
// where their plugin asks for it, then adds to cfg what the plugins'
// Allocate responses give the container. A container holding no devices
// is left as it is.
func (m *Manager) ContainerDevices(ctx context.Context, pod *corev1.Pod, container string, cfg *runtimeapi.ContainerConfig) error {
	type preStart struct {
		resource string
		client   pluginapi.DevicePluginClient
		ids      []string
	}
	var calls []preStart
	var responses []*pluginapi.ContainerAllocateResponse
	m.mu.Lock()
	for _, k := range slices.SortedFunc(maps.Keys(m.assignments), func(a, b key) int { return cmpString(a.resource, b.resource) }) {
		if k.pod != pod.UID || k.container != container {
			continue
		}
		a := m.assignments[k]
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(a.AllocResp, resp); err != nil {
			m.mu.Unlock()
			return fmt.Errorf("decoding the allocation of %s to container %s: %w", k.resource, container, err)
		}
		responses = append(responses, resp)
		ep := m.resources[k.resource]
		if ep == nil || !ep.options.GetPreStartRequired() {
			continue
		}
		if ep.client == nil {
			m.mu.Unlock()
			return fmt.Errorf("device plugin of resource %s is not running for its PreStartContainer", k.resource)
		}
		calls = append(calls, preStart{k.resource, ep.client, slices.Clone(a.DeviceIDs)})
	}
	m.mu.Unlock()
	for _, c := range calls {
		cctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
		_, err := c.client.PreStartContainer(cctx, &pluginapi.PreStartContainerRequest{DevicesIds: c.ids})
		cancel()
		if err != nil {
			return fmt.Errorf("device plugin PreStartContainer of %s for container %s: %w", c.resource, container, err)
		}
	}
	ApplyResponses(cfg, responses)
	return nil
}
