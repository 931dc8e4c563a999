package admission

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func node(pods int64, cpu, mem string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
			"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "zone": "a",
		}},
		Spec: v1.NodeSpec{Taints: taints},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
			v1.ResourceCPU:    resource.MustParse(cpu),
			v1.ResourceMemory: resource.MustParse(mem),
		}},
	}
}

type podOpt func(*v1.Pod)

func pod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func requests(cpu, mem string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{
			v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem),
		}
	}
}

// Scalar resources of the admission tables.
const (
	gpu          v1.ResourceName = "example.com/gpu"
	hugepages2Mi v1.ResourceName = "hugepages-2Mi"
)

// scalar adds a request of name to the pod's container.
func scalar(name v1.ResourceName, q string) podOpt {
	return func(p *v1.Pod) {
		c := &p.Spec.Containers[0]
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		c.Resources.Requests[name] = resource.MustParse(q)
	}
}

// withAlloc gives the node q of name.
func withAlloc(n *v1.Node, name v1.ResourceName, q string) *v1.Node {
	n.Status.Allocatable[name] = resource.MustParse(q)
	return n
}

func phase(ph v1.PodPhase) podOpt { return func(p *v1.Pod) { p.Status.Phase = ph } }

func hostPort(port int32) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port}}
	}
}

func pods(n int, opts ...podOpt) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("p%d", i), opts...)
	}
	return out
}

// deviceClassResource is the extended resource name that a DeviceClass
// without an explicit one is requested by (DRAExtendedResource).
const deviceClassResource v1.ResourceName = "deviceclass.resource.kubernetes.io/gpu-class"

func TestAdmit(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	never := v1.ContainerRestartPolicyNever
	cases := []struct {
		name       string
		pod        *v1.Pod
		node       *v1.Node
		admitted   []*v1.Pod
		wantReason string // empty: admitted
		wantMsg    string
	}{
		{name: "empty node", pod: pod("new"), node: node(110, "2", "4Gi")},
		{name: "last free pod slot", pod: pod("new"), node: node(3, "2", "4Gi"), admitted: pods(2)},
		{name: "over max pods", pod: pod("new"), node: node(3, "2", "4Gi"), admitted: pods(3),
			wantReason: ReasonOutOfPods, wantMsg: "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"},
		{name: "terminal pods do not count", pod: pod("new"), node: node(3, "2", "4Gi"),
			admitted: append(pods(2), pod("done", phase(v1.PodSucceeded)), pod("failed", phase(v1.PodFailed)))},
		{name: "the pod itself does not count", pod: pod("p0"), node: node(1, "2", "4Gi"), admitted: pods(1)},
		{name: "cpu fits", pod: pod("new", requests("500m", "1Mi")), node: node(110, "2", "4Gi"),
			admitted: pods(3, requests("500m", "1Mi"))},
		{name: "cpu over allocatable", pod: pod("new", requests("600m", "1Mi")), node: node(110, "2", "4Gi"),
			admitted: pods(3, requests("500m", "1Mi")), wantReason: ReasonOutOfCPU,
			wantMsg: "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"},
		{name: "memory over allocatable", pod: pod("new", requests("1m", "5Gi")), node: node(110, "2", "4Gi"),
			wantReason: ReasonOutOfMemory},
		{name: "node selector matches", pod: pod("new", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }),
			node: node(110, "2", "4Gi")},
		{name: "node selector mismatch", pod: pod("new", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }),
			node: node(110, "2", "4Gi"), wantReason: ReasonNodeAffinity,
			wantMsg: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "required affinity mismatch", pod: pod("new", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
					MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"b", "c"}}},
				}}},
			}}
		}), node: node(110, "2", "4Gi"), wantReason: ReasonNodeAffinity},
		{name: "untolerated NoExecute taint", pod: pod("new"),
			node:       node(110, "2", "4Gi", v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute}),
			wantReason: ReasonTaintToleration, wantMsg: "untolerated taint {dedicated: gpu}"},
		{name: "untolerated NoSchedule taint", pod: pod("new"),
			node: node(110, "2", "4Gi", v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}), wantReason: ReasonTaintToleration},
		{name: "condition NoSchedule taint is not enforced", pod: pod("new"),
			node: node(110, "2", "4Gi", v1.Taint{Key: "node.kubernetes.io/not-ready", Effect: v1.TaintEffectNoSchedule})},
		{name: "the cloud provider's uninitialized taint is not enforced", pod: pod("new"),
			node: node(110, "2", "4Gi", v1.Taint{Key: UninitializedTaintKey, Value: "true", Effect: v1.TaintEffectNoSchedule})},
		{name: "condition NoExecute taint is enforced", pod: pod("new"),
			node:       node(110, "2", "4Gi", v1.Taint{Key: "node.kubernetes.io/not-ready", Effect: v1.TaintEffectNoExecute}),
			wantReason: ReasonTaintToleration},
		{name: "PreferNoSchedule is not enforced", pod: pod("new"),
			node: node(110, "2", "4Gi", v1.Taint{Key: "k", Effect: v1.TaintEffectPreferNoSchedule})},
		{name: "tolerated taint", pod: pod("new", func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}
		}), node: node(110, "2", "4Gi", v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute})},
		{name: "host port conflict", pod: pod("new", hostPort(8080)), node: node(110, "2", "4Gi"),
			admitted: pods(1, hostPort(8080)), wantReason: ReasonNodePorts},
		{name: "different host ports", pod: pod("new", hostPort(8081)), node: node(110, "2", "4Gi"), admitted: pods(1, hostPort(8080))},
		{name: "pod OS windows", pod: pod("new", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} }),
			node: node(110, "2", "4Gi"), wantReason: ReasonPodOSNotSupported},
		{name: "init container with restartPolicy Never", pod: pod("new", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "busybox", RestartPolicy: &never}}
		}), node: node(110, "2", "4Gi"), wantReason: ReasonInitContainerPolicy},
		{name: "sidecar init container", pod: pod("new", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "busybox", RestartPolicy: &always}}
		}), node: node(110, "2", "4Gi")},
		{name: "extended resource fits", pod: pod("new", scalar(gpu, "1")), node: withAlloc(node(110, "2", "4Gi"), gpu, "2"),
			admitted: pods(1, scalar(gpu, "1"))},
		{name: "extended resource taken by the running pods", pod: pod("new", scalar(gpu, "1")),
			node: withAlloc(node(110, "2", "4Gi"), gpu, "2"), admitted: pods(2, scalar(gpu, "1")),
			wantReason: "OutOfexample.com/gpu",
			wantMsg:    "Node didn't have enough resource: example.com/gpu, requested: 1, used: 2, capacity: 2"},
		{name: "extended resource over what the node advertises", pod: pod("new", scalar(gpu, "3")),
			node: withAlloc(node(110, "2", "4Gi"), gpu, "2"), wantReason: "OutOfexample.com/gpu"},
		{name: "extended resource advertised as zero", pod: pod("new", scalar(gpu, "1")),
			node: withAlloc(node(110, "2", "4Gi"), gpu, "0"), wantReason: "OutOfexample.com/gpu"},
		{name: "extended resource the node does not advertise is a cluster-level one", pod: pod("new", scalar(gpu, "5")),
			node: node(110, "2", "4Gi")},
		{name: "extended resource a DRA claim provides", pod: pod("new", scalar(gpu, "3"), func(p *v1.Pod) {
			p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "c",
				RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: string(gpu), RequestName: "r"}}}
		}), node: withAlloc(node(110, "2", "4Gi"), gpu, "2")},
		{name: "a device class's implicit extended resource a DRA claim provides", pod: pod("new", scalar(deviceClassResource, "2"), func(p *v1.Pod) {
			p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "c",
				RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "c", ResourceName: string(deviceClassResource), RequestName: "r"}}}
		}), node: node(110, "2", "4Gi")},
		{name: "a device class's implicit extended resource without a claim", pod: pod("new", scalar(deviceClassResource, "2")),
			node: node(110, "2", "4Gi"), wantReason: "OutOf" + string(deviceClassResource)},
		{name: "huge pages fit", pod: pod("new", scalar(hugepages2Mi, "4Mi")), node: withAlloc(node(110, "2", "4Gi"), hugepages2Mi, "8Mi"),
			admitted: pods(1, scalar(hugepages2Mi, "4Mi"))},
		{name: "huge pages over allocatable", pod: pod("new", scalar(hugepages2Mi, "6Mi")),
			node: withAlloc(node(110, "2", "4Gi"), hugepages2Mi, "8Mi"), admitted: pods(1, scalar(hugepages2Mi, "4Mi")),
			wantReason: "OutOfhugepages-2Mi",
			wantMsg:    "Node didn't have enough resource: hugepages-2Mi, requested: 6291456, used: 4194304, capacity: 8388608"},
		{name: "huge pages of a size the node does not have", pod: pod("new", scalar("hugepages-1Gi", "1Gi")),
			node: node(110, "2", "4Gi"), wantReason: "OutOfhugepages-1Gi",
			wantMsg: "Node didn't have enough resource: hugepages-1Gi, requested: 1073741824, used: 0, capacity: 0"},
		{name: "cpu is reported before an extended resource", pod: pod("new", requests("3", "1Mi"), scalar(gpu, "3")),
			node: withAlloc(node(110, "2", "4Gi"), gpu, "2"), wantReason: ReasonOutOfCPU},
		{name: "extended resources are checked by name", pod: pod("new", scalar(gpu, "1"), scalar("example.com/a", "1")),
			node: withAlloc(withAlloc(node(110, "2", "4Gi"), gpu, "0"), "example.com/a", "0"), wantReason: "OutOfexample.com/a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Fits(tc.pod, tc.node, tc.admitted)
			if tc.wantReason == "" {
				if !got.Admit {
					t.Fatalf("want admitted, got %+v", got)
				}
				return
			}
			if got.Admit || got.Reason != tc.wantReason {
				t.Fatalf("want reason %s, got %+v", tc.wantReason, got)
			}
			if !strings.Contains(got.Message, tc.wantMsg) {
				t.Fatalf("message %q does not contain %q", got.Message, tc.wantMsg)
			}
		})
	}
}

func TestPodRequests(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	initContainer := func(cpu string, sidecar bool) podOpt {
		return func(p *v1.Pod) {
			c := v1.Container{Name: "init", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}
			if sidecar {
				c.RestartPolicy = &always
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
	}
	overhead := func(cpu string) podOpt {
		return func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)} }
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		cpu  string
	}{
		{"containers only", pod("p", requests("200m", "64Mi")), "200m"},
		{"a larger init container", pod("p", requests("200m", "64Mi"), initContainer("1", false)), "1"},
		{"a smaller init container", pod("p", requests("200m", "64Mi"), initContainer("100m", false)), "200m"},
		{"a sidecar adds to the containers", pod("p", requests("200m", "64Mi"), initContainer("100m", true)), "300m"},
		{"overhead adds to the pod", pod("p", requests("200m", "64Mi"), overhead("50m")), "250m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PodRequests(tc.pod)
			if want := resource.MustParse(tc.cpu); got.Cpu().Cmp(want) != 0 {
				t.Errorf("cpu = %v, want %v", got.Cpu(), &want)
			}
		})
	}
}

// remembered is the requests of pods, as an Admitter keeps them.
func remembered(pods []*v1.Pod) *Requests {
	r := &Requests{}
	for _, p := range pods {
		r.Set(p)
	}
	return r
}

// BenchmarkAdmit admits one more pod beside 109 running ones that request
// cpu and memory: a pod without requests, and one with, their requests
// summed at each decision and remembered.
func BenchmarkAdmit(b *testing.B) {
	n := node(250, "64", "256Gi")
	running := pods(109, requests("10m", "16Mi"))
	known := remembered(running)
	for _, bc := range []struct {
		name  string
		pod   *v1.Pod
		known *Requests
	}{
		{"no requests", pod("new"), nil},
		{"requests", pod("new", requests("10m", "16Mi")), nil},
		{"requests remembered", pod("new", requests("10m", "16Mi")), known},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := (Policy{Requests: bc.known}).Admit(bc.pod, n, running); !r.Admit {
					b.Fatalf("not admitted: %s", r.Message)
				}
			}
		})
	}
}

func TestRememberedRequestsDecideAsTheSpecs(t *testing.T) {
	n := node(10, "1", "1Gi")
	running := pods(3, requests("300m", "100Mi"))
	known := remembered(running)
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"fits", pod("new", requests("100m", "10Mi")), ""},
		{"too much cpu", pod("new", requests("200m", "10Mi")), ReasonOutOfCPU},
	} {
		for _, k := range []*Requests{nil, known} {
			if r := (Policy{Requests: k}).Admit(tc.pod, n, running); r.Reason != tc.want {
				t.Errorf("%s, remembered %v: reason %q, want %q", tc.name, k != nil, r.Reason, tc.want)
			}
		}
	}
	// What is remembered is what counts, until the pod is forgotten; then
	// it is read from its spec again.
	running[0].Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("50m")
	if r := (Policy{Requests: known}).Admit(pod("new", requests("200m", "10Mi")), n, running); r.Admit {
		t.Error("a remembered pod's requests were read from its spec again")
	}
	known.Forget(running[0].UID)
	if r := (Policy{Requests: known}).Admit(pod("new", requests("200m", "10Mi")), n, running); !r.Admit {
		t.Errorf("after a pod shrank and was forgotten: %s, want admitted", r.Message)
	}
}
