package e2e

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

var nsCounter atomic.Int32

// newNamespace creates a namespace for one spec, with the default service
// account the API server's admission insists on, and deletes it afterwards.
func newNamespace(ctx context.Context, c client.Client) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e2e-%d-%d", GinkgoParallelProcess(), nsCounter.Add(1))}}
	Expect(c.Create(ctx, ns)).To(Succeed())
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
	Expect(c.Create(ctx, sa)).To(Succeed())
	return ns.Name
}

// busyboxPod is a pod bound to node running one busybox container with the
// given command.
func busyboxPod(ns, name, node string, command ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           utils.BusyboxImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         command,
			}},
		},
	}
}

// podStatus returns a function for Eventually that reads the pod.
func getPod(ctx context.Context, c client.Client, ns, name string) func(Gomega) *corev1.Pod {
	return func(g Gomega) *corev1.Pod {
		p := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		return p
	}
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// md5hex is the hex MD5 of s, as md5sum prints it.
func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
