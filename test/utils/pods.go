package utils

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FetchCommand is a busybox command that fetches url and fails when that
// takes more than 10 s (a connection the routes or Service rules do not
// carry yet hangs until TCP gives up, minutes later). Not wget -T:
// Debian's busybox-static wget crashes with it. Not timeout alone either:
// busybox's timeout execs the command, which as the container's PID 1
// ignores the SIGTERM meant to end it; under a shell it does not.
func FetchCommand(url string) []string {
	return []string{"sh", "-c", "timeout 10 wget -q -O - " + url + "; exit $?"}
}

// BusyboxPod is a pod bound to node running one container, "main", of the
// harness's busybox image with command. It mounts no service account token
// and has a 5 s grace period; callers change what their case needs.
func BusyboxPod(ns, name, node string, command ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           BusyboxImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         command,
			}},
		},
	}
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// CreateNamespace creates the namespace name with the default service
// account that the API server's admission insists on (envtest runs no
// controller-manager to create it; when one runs, it may have been first).
func CreateNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default service account of %s: %w", name, err)
	}
	return nil
}
