package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

func TestComputePodQOS(t *testing.T) {
	req := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	res := func(name string, r, l v1.ResourceList) podtest.Option {
		return podtest.Modify(name, func(c *v1.Container) { c.Resources = v1.ResourceRequirements{Requests: r, Limits: l} })
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"nothing", podtest.NewPod(), v1.PodQOSBestEffort},
		{"equal requests and limits", podtest.NewPod(res("app", req("1", "1Gi"), req("1", "1Gi"))), v1.PodQOSGuaranteed},
		{"limits only", podtest.NewPod(func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = req("1", "1Gi") }), v1.PodQOSBurstable},
		{"cpu only", podtest.NewPod(res("app", req("1", ""), req("1", ""))), v1.PodQOSBurstable},
		{"requests below limits", podtest.NewPod(res("app", req("500m", "1Gi"), req("1", "1Gi"))), v1.PodQOSBurstable},
		{"one guaranteed one best effort", podtest.NewPod(podtest.Containers("a", "b"), res("a", req("1", "1Gi"), req("1", "1Gi"))), v1.PodQOSBurstable},
		{"init container counts", podtest.NewPod(podtest.Inits("init"), res("app", req("1", "1Gi"), req("1", "1Gi"))), v1.PodQOSBurstable},
		{"pod-level resources decide", podtest.NewPod(func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: req("1", "1Gi"), Limits: req("1", "1Gi")}
		}), v1.PodQOSGuaranteed},
		{"status wins", podtest.NewPod(func(p *v1.Pod) { p.Status.QOSClass = v1.PodQOSGuaranteed }), v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodQOS(tt.pod); got != tt.want {
				t.Errorf("PodQOS = %s, want %s", got, tt.want)
			}
		})
	}
}
