package criconfig

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UserNamespaceSupport is what the runtime supports of user namespaces for
// the handler a pod runs in, as its Status response reports it.
type UserNamespaceSupport struct {
	// Handler is whether the pod's runtime handler supports user
	// namespaces (with idmapped mounts).
	Handler bool
	// HostNetwork is whether the runtime supports a user namespace with the
	// host's network.
	HostNetwork bool
}

// WantsUserNamespace reports whether the pod asks for a user namespace of
// its own (hostUsers: false).
func WantsUserNamespace(pod *v1.Pod) bool {
	return pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
}

// CheckUserNamespace decides whether the node can give the pod the user
// namespace it asks for, running in handler ("" for the runtime's default).
// A pod that does not ask for one always can. The errors are the kubelet's
// sandbox creation failures; the host namespaces the API server forbids
// with hostUsers: false are refused again here, as a pod may come from
// elsewhere or from an API server with other validation.
func CheckUserNamespace(pod *v1.Pod, handler string, s UserNamespaceSupport) error {
	if !WantsUserNamespace(pod) {
		return nil
	}
	if !s.Handler {
		if handler != "" {
			return fmt.Errorf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
		}
		return errors.New("can't set `spec.hostUsers: false`, runtime does not support user namespaces")
	}
	switch {
	case pod.Spec.HostPID:
		return errors.New("can't set `spec.hostUsers: false` with `spec.hostPID: true`")
	case pod.Spec.HostIPC:
		return errors.New("can't set `spec.hostUsers: false` with `spec.hostIPC: true`")
	case pod.Spec.HostNetwork && !s.HostNetwork:
		return errors.New("can't set `spec.hostUsers: false` with `spec.hostNetwork: true`, runtime does not support user namespaces with the host network")
	}
	return nil
}

// IDRange is a range of host IDs mapped into a pod's user namespace from
// ID 0 up: the pod's root is host ID First.
type IDRange struct {
	First  uint32
	Length uint32
}

// UserNamespaceOptions returns the CRI user namespace of a pod's sandbox
// and containers: the node's (mode NODE) unless the pod asks for its own,
// then mode POD with ids mapping the same range for users and groups. As
// the kubelet does, NODE is sent explicitly.
func UserNamespaceOptions(pod *v1.Pod, ids IDRange) *runtimeapi.UserNamespace {
	if !WantsUserNamespace(pod) {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}
	}
	mapping := func() []*runtimeapi.IDMapping {
		return []*runtimeapi.IDMapping{{HostId: ids.First, ContainerId: 0, Length: ids.Length}}
	}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: mapping(), Gids: mapping()}
}

// idmapMounts returns a container's mounts with their owners mapped into
// the pod's user namespace (idmapped mounts), as the kubelet does for a pod
// with one; mounts itself is not changed.
func idmapMounts(mounts []*runtimeapi.Mount, userns *runtimeapi.UserNamespace) []*runtimeapi.Mount {
	if userns == nil || userns.Mode != runtimeapi.NamespaceMode_POD {
		return mounts
	}
	out := make([]*runtimeapi.Mount, len(mounts))
	for i, m := range mounts {
		m = proto.Clone(m).(*runtimeapi.Mount)
		m.UidMappings, m.GidMappings = userns.Uids, userns.Gids
		out[i] = m
	}
	return out
}
