package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
)

// EventNetworkNotReady is the reason of the Warning Event a pod gets each
// time its sandbox is held for the runtime's network, the kubelet's.
const EventNetworkNotReady = "NetworkNotReady"

// errNetworkNotReady starts the error of a sync held for the network: the
// kubelet's "network is not ready: <why>", which is also the Event's
// message.
var errNetworkNotReady = errors.New("network is not ready")

// networkRetry is how soon a pod held for the network is synced again at
// the latest: the kubelet's pod worker retries such a pod after a second
// (jittered up to 1.5 s), as the network may be ready any moment.
const networkRetry = time.Second

// networkGate holds a pod whose plan creates a sandbox on the pod network
// while the runtime's network is not ready, as the kubelet does: it
// returns "network is not ready: <network's error>", or nil for the sync
// to go on. network says why the runtime's network is not ready (nil:
// ready, or not known); it is asked only when the plan creates a sandbox
// for a pod that is not hostNetwork. Host-network pods start as ever, and
// a pod that keeps its sandbox keeps (re)starting its containers: they
// need no new network. (The kubelet holds every sync of a pod on the pod
// network, also of one already running.)
func networkGate(pod *corev1.Pod, actions plan.PodActions, network func() error) error {
	if !actions.CreateSandbox || pod.Spec.HostNetwork {
		return nil
	}
	if err := network(); err != nil {
		return fmt.Errorf("%w: %w", errNetworkNotReady, err)
	}
	return nil
}

// syncRetry caps the back-off of a failed sync that may succeed soon and
// is cheap to try again: a pod held for the network, or whose volumes wait
// for their claims.
func syncRetry(err error) time.Duration {
	if errors.Is(err, errNetworkNotReady) {
		return networkRetry
	}
	return volumeRetry(err)
}

// networkErr is why the runtime's network is not ready, as last read (at
// most runtimestate.DefaultMaxAge ago), or nil.
func (r *PodReconciler) networkErr(ctx context.Context) error {
	if r.Network == nil {
		return nil
	}
	return r.Network.Err(ctx)
}
