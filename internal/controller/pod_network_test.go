package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/volume"
)

func TestNetworkGate(t *testing.T) {
	notReady := errors.New("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")
	podNetwork, hostNetwork := &corev1.Pod{}, &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}}
	create := plan.PodActions{CreateSandbox: true, ContainersToStart: []plan.ContainerStart{{Name: "app"}}}
	recreate := plan.PodActions{KillPod: true, CreateSandbox: true}
	keep := plan.PodActions{ContainersToStart: []plan.ContainerStart{{Name: "app"}}}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		actions plan.PodActions
		network error
		// want is the error's text, "" for none; asked: the network state
		// is read.
		want  string
		asked bool
	}{
		{
			name: "a new sandbox on the pod network waits for the network", pod: podNetwork, actions: create, network: notReady, asked: true,
			want: "network is not ready: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
		},
		{name: "a sandbox to re-create waits too, and the old one is not killed", pod: podNetwork, actions: recreate, network: notReady, asked: true,
			want: "network is not ready: " + notReady.Error()},
		{name: "the network is ready", pod: podNetwork, actions: create, asked: true},
		{name: "a host-network pod starts as ever", pod: hostNetwork, actions: create, network: notReady},
		{name: "a pod that keeps its sandbox restarts its containers", pod: podNetwork, actions: keep, network: notReady},
		{name: "a pod with nothing to start", pod: podNetwork, actions: plan.PodActions{Done: true}, network: notReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := false
			err := networkGate(tc.pod, tc.actions, func() error { asked = true; return tc.network })
			if got := fmt.Sprint(err); (err == nil) != (tc.want == "") || err != nil && got != tc.want {
				t.Errorf("networkGate() = %v, want %q", err, tc.want)
			}
			if err != nil && !errors.Is(err, errNetworkNotReady) {
				t.Errorf("networkGate() = %v, not errNetworkNotReady", err)
			}
			if asked != tc.asked {
				t.Errorf("network state read: %v, want %v", asked, tc.asked)
			}
		})
	}
}

func TestSyncRetry(t *testing.T) {
	held := fmt.Errorf("%w: container runtime network not ready", errNetworkNotReady)
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"held for the network: the kubelet's second", held, networkRetry},
		{"wrapped", fmt.Errorf("syncing: %w", held), networkRetry},
		{"volumes waiting for their claims", &volume.SetUpError{Stage: volume.StageProcess, Err: errors.New("PVC is not bound")}, volumeProcessRetry},
		{"any other error: the worker's back-off", errors.New("boom"), 0},
		{"no error", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := syncRetry(tc.err); got != tc.want {
				t.Errorf("syncRetry(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
