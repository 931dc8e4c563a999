package eviction

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const mi = int64(1 << 20)

type podOpt func(*v1.Pod)

func withPriority(p int32) podOpt { return func(pod *v1.Pod) { pod.Spec.Priority = ptr.To(p) } }

func withRequest(name v1.ResourceName, q string) podOpt {
	return func(pod *v1.Pod) {
		pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{name: resource.MustParse(q)}
	}
}

func withLimit(name v1.ResourceName, q string) podOpt {
	return func(pod *v1.Pod) {
		pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{name: resource.MustParse(q)}
	}
}

func withAnnotation(k, v string) podOpt {
	return func(pod *v1.Pod) {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = v
	}
}

func testPod(name string, opts ...podOpt) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}}},
	}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

func memUsage(pod *v1.Pod, bytes int64) PodUsage {
	return PodUsage{Pod: pod, Memory: ptr.To(bytes), Containers: []ContainerUsage{{Name: "app", Memory: ptr.To(bytes)}}}
}

func names(pods []PodUsage) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Pod.Name)
	}
	return out
}

func TestRank(t *testing.T) {
	tests := []struct {
		name   string
		signal Signal
		pods   []PodUsage
		want   []string
	}{
		{name: "memory: over its request before under it, whatever the priority",
			signal: SignalMemoryAvailable,
			pods: []PodUsage{
				memUsage(testPod("under", withRequest(v1.ResourceMemory, "500Mi")), 400*mi),
				memUsage(testPod("over-high", withPriority(1000)), 10*mi),
			},
			want: []string{"over-high", "under"}},
		{name: "memory: then lower priority first",
			signal: SignalMemoryAvailable,
			pods: []PodUsage{
				memUsage(testPod("big-high", withPriority(100)), 900*mi),
				memUsage(testPod("small-low", withPriority(-5)), 10*mi),
			},
			want: []string{"small-low", "big-high"}},
		{name: "memory: then most above its request first",
			signal: SignalMemoryAvailable,
			pods: []PodUsage{
				memUsage(testPod("small"), 10*mi),
				memUsage(testPod("requested", withRequest(v1.ResourceMemory, "800Mi")), 900*mi),
				memUsage(testPod("big"), 300*mi),
			},
			want: []string{"big", "requested", "small"}},
		{name: "memory: unknown usage counts as over its request",
			signal: SignalMemoryAvailable,
			pods: []PodUsage{
				memUsage(testPod("under", withRequest(v1.ResourceMemory, "1Gi")), 10*mi),
				{Pod: testPod("unknown")},
			},
			want: []string{"unknown", "under"}},
		{name: "disk: ephemeral storage over its request first, then priority, then usage",
			signal: SignalNodeFsAvailable,
			pods: []PodUsage{
				{Pod: testPod("under", withRequest(v1.ResourceEphemeralStorage, "1Gi")), Ephemeral: ptr.To(10 * mi)},
				{Pod: testPod("small"), Ephemeral: ptr.To(1 * mi)},
				{Pod: testPod("big"), Ephemeral: ptr.To(100 * mi)},
				{Pod: testPod("low", withPriority(-1)), Ephemeral: ptr.To(1 * mi)},
			},
			want: []string{"low", "big", "small", "under"}},
		{name: "disk: a pod whose volume could not be fully counted uses the most",
			signal: SignalNodeFsAvailable,
			pods: []PodUsage{
				{Pod: testPod("big"), Ephemeral: ptr.To(100 * mi)},
				{Pod: testPod("hidden", withRequest(v1.ResourceEphemeralStorage, "1Gi")), Ephemeral: ptr.To(1 * mi),
					Volumes: incompleteVols("scratch", mi)},
			},
			want: []string{"hidden", "big"}},
		{name: "inodes: the pod using the most inodes goes first, not the one using the most bytes",
			signal: SignalNodeFsInodesFree,
			pods: []PodUsage{
				{Pod: testPod("bytes"), Ephemeral: ptr.To(900 * mi), Inodes: ptr.To[int64](12)},
				{Pod: testPod("empty-files"), Ephemeral: ptr.To(4 * mi), Inodes: ptr.To[int64](1 << 20)},
				{Pod: testPod("some-files"), Ephemeral: ptr.To(10 * mi), Inodes: ptr.To[int64](5000)},
			},
			want: []string{"empty-files", "some-files", "bytes"}},
		{name: "inodes on the image filesystem rank the same way",
			signal: SignalImageFsInodesFree,
			pods: []PodUsage{
				{Pod: testPod("bytes"), Ephemeral: ptr.To(900 * mi), Inodes: ptr.To[int64](12)},
				{Pod: testPod("empty-files"), Ephemeral: ptr.To(4 * mi), Inodes: ptr.To[int64](1 << 20)},
			},
			want: []string{"empty-files", "bytes"}},
		{name: "inodes: an ephemeral-storage request does not shelter a pod's inodes",
			signal: SignalNodeFsInodesFree,
			pods: []PodUsage{
				{Pod: testPod("bytes"), Ephemeral: ptr.To(900 * mi), Inodes: ptr.To[int64](12)},
				{Pod: testPod("requested", withRequest(v1.ResourceEphemeralStorage, "10Gi")), Ephemeral: ptr.To(4 * mi), Inodes: ptr.To[int64](1 << 20)},
			},
			want: []string{"requested", "bytes"}},
		{name: "inodes: any usage is above the request there is none of, then priority, then inodes",
			signal: SignalNodeFsInodesFree,
			pods: []PodUsage{
				{Pod: testPod("none"), Ephemeral: ptr.To(mi), Inodes: ptr.To[int64](0)},
				{Pod: testPod("many-high", withPriority(10)), Inodes: ptr.To[int64](1 << 20)},
				{Pod: testPod("few-low", withPriority(-10)), Inodes: ptr.To[int64](3)},
				{Pod: testPod("unknown")},
			},
			want: []string{"few-low", "unknown", "many-high", "none"}},
		{name: "inodes: a pod whose volume could not be fully counted uses the most",
			signal: SignalNodeFsInodesFree,
			pods: []PodUsage{
				{Pod: testPod("many"), Inodes: ptr.To[int64](1 << 20)},
				{Pod: testPod("hidden"), Inodes: ptr.To[int64](10), Volumes: incompleteVols("scratch", mi)},
			},
			want: []string{"hidden", "many"}},
		{name: "pids: priority, then processes",
			signal: SignalPIDAvailable,
			pods: []PodUsage{
				{Pod: testPod("few"), Processes: ptr.To[int64](2)},
				{Pod: testPod("many-high", withPriority(10)), Processes: ptr.To[int64](500)},
				{Pod: testPod("many"), Processes: ptr.To[int64](100)},
			},
			want: []string{"many", "few", "many-high"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.pods)
			if got := names(Rank(tt.signal, tt.pods)); !slices.Equal(got, tt.want) {
				t.Errorf("Rank = %v, want %v", got, tt.want)
			}
			if !slices.Equal(names(in), names(tt.pods)) {
				t.Error("Rank reordered its input")
			}
		})
	}
}
