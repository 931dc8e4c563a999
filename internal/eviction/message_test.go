package eviction

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/volumestats"
)

func TestMessage(t *testing.T) {
	memT := Threshold{Signal: SignalMemoryAvailable, Value: Value{Quantity: ptr.To(resource.MustParse("100Mi"))}}
	diskT := Threshold{Signal: SignalNodeFsAvailable, Value: Value{Percentage: 10}}
	pidT := Threshold{Signal: SignalPIDAvailable, Value: Value{Quantity: ptr.To(resource.MustParse("100"))}}
	twoContainers := testPod("p", withRequest(v1.ResourceMemory, "100Mi"))
	twoContainers.Spec.Containers = append(twoContainers.Spec.Containers, v1.Container{Name: "side"})
	tests := []struct {
		name string
		t    Threshold
		o    Observation
		p    PodUsage
		want string
	}{
		{name: "memory, a container over its request",
			t: memT, o: Observation{Available: 80 * mi, Capacity: 1 << 30},
			p:    memUsage(testPod("x"), 300*mi),
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container app was using 300Mi, request is 0, has larger consumption of memory. "},
		{name: "memory, only the containers over their requests are named",
			t: memT, o: Observation{Available: 80 * mi, Capacity: 1 << 30},
			p: PodUsage{Pod: twoContainers, Containers: []ContainerUsage{
				{Name: "app", Memory: ptr.To(50 * mi)}, {Name: "side", Memory: ptr.To(20 * mi)}}},
			want: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container side was using 20Mi, request is 0, has larger consumption of memory. "},
		{name: "disk, a percentage threshold",
			t: diskT, o: Observation{Available: 512 * mi, Capacity: 10 << 30},
			p:    PodUsage{Pod: testPod("x"), Containers: []ContainerUsage{{Name: "app", Ephemeral: ptr.To(2 * mi)}}},
			want: "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi. Container app was using 2Mi, request is 0, has larger consumption of ephemeral-storage. "},
		{name: "pids: no container part",
			t: pidT, o: Observation{Available: 50, Capacity: 4096},
			p:    PodUsage{Pod: testPod("x"), Processes: ptr.To[int64](3000)},
			want: "The node was low on resource: pids. Threshold quantity: 100, available: 50. "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Message(tt.t, tt.o, tt.p); got != tt.want {
				t.Errorf("Message =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestAdmissionAndEventMessages(t *testing.T) {
	if got, want := AdmissionMessage([]v1.NodeConditionType{v1.NodeMemoryPressure}), "The node had condition: [MemoryPressure]. "; got != want {
		t.Errorf("AdmissionMessage = %q, want %q", got, want)
	}
	if got, want := ThresholdMetEventMessage(Threshold{Signal: SignalNodeFsInodesFree}), "Attempting to reclaim inodes"; got != want {
		t.Errorf("ThresholdMetEventMessage = %q, want %q", got, want)
	}
}

// vols is one volume's complete measure.
func vols(name string, bytes int64) map[string]VolumeUsage {
	return map[string]VolumeUsage{name: {Usage: volumestats.Usage{Bytes: bytes, Inodes: 1}}}
}

// incompleteVols is one volume's measure by a walk that could not count
// every entry: bytes were counted before it stopped.
func incompleteVols(name string, bytes int64) map[string]VolumeUsage {
	return map[string]VolumeUsage{name: {Usage: volumestats.Usage{Bytes: bytes, Inodes: 1}, Incomplete: true}}
}

func TestLocalStorageViolation(t *testing.T) {
	withEmptyDir := func(name, limit string, medium v1.StorageMedium) podOpt {
		return func(pod *v1.Pod) {
			ed := &v1.EmptyDirVolumeSource{Medium: medium}
			if limit != "" {
				ed.SizeLimit = ptr.To(resource.MustParse(limit))
			}
			pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: ed}})
		}
	}
	tests := []struct {
		name string
		p    PodUsage
		want string
	}{
		{name: "no limits", p: PodUsage{Pod: testPod("x", withEmptyDir("scratch", "", "")), Volumes: vols("scratch", 1<<30)}},
		{name: "emptyDir within its limit",
			p: PodUsage{Pod: testPod("x", withEmptyDir("scratch", "1Mi", "")), Volumes: vols("scratch", mi)}},
		{name: "emptyDir past its limit",
			p:    PodUsage{Pod: testPod("x", withEmptyDir("scratch", "1Mi", "")), Volumes: vols("scratch", mi+1)},
			want: `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `},
		{name: "memory-backed emptyDir is not local storage",
			p: PodUsage{Pod: testPod("x", withEmptyDir("shm", "1Mi", v1.StorageMediumMemory)), Volumes: vols("shm", 10*mi)}},
		{name: "emptyDir not measured",
			p: PodUsage{Pod: testPod("x", withEmptyDir("scratch", "1Mi", ""))}},
		{name: "pod past the sum of its containers' limits",
			p: PodUsage{Pod: testPod("x", withLimit(v1.ResourceEphemeralStorage, "10Mi")), Ephemeral: ptr.To(11 * mi),
				Containers: []ContainerUsage{{Name: "app", Ephemeral: ptr.To(mi)}}},
			want: "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "},
		{name: "pod past its init container's limit",
			p: PodUsage{Pod: testPod("x", func(pod *v1.Pod) {
				pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
					Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Mi")}}}}
			}), Ephemeral: ptr.To(11 * mi)},
			want: "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "},
		{name: "emptyDir not fully counted, within its limit so far, is past it",
			p:    PodUsage{Pod: testPod("x", withEmptyDir("scratch", "1Gi", "")), Volumes: incompleteVols("scratch", mi)},
			want: `Usage of EmptyDir volume "scratch" exceeds the limit "1Gi". `},
		{name: "emptyDir not fully counted, without a limit, is no violation",
			p: PodUsage{Pod: testPod("x", withEmptyDir("scratch", "", "")), Volumes: incompleteVols("scratch", mi)}},
		{name: "pod with an emptyDir not fully counted is past its limit",
			p: PodUsage{Pod: testPod("x", withLimit(v1.ResourceEphemeralStorage, "1Gi"), withEmptyDir("scratch", "", "")),
				Ephemeral: ptr.To(2 * mi), Volumes: incompleteVols("scratch", mi),
				Containers: []ContainerUsage{{Name: "app", Ephemeral: ptr.To(mi)}}},
			want: "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. "},
		{name: "container past its own limit",
			p: PodUsage{Pod: testPod("x", withLimit(v1.ResourceEphemeralStorage, "10Mi")), Ephemeral: ptr.To(10 * mi),
				Containers: []ContainerUsage{{Name: "app", Ephemeral: ptr.To(10*mi + 1)}}},
			want: `Container app exceeded its local ephemeral storage limit "10Mi". `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := LocalStorageViolation(tt.p); got != tt.want {
				t.Errorf("LocalStorageViolation = %q, want %q", got, tt.want)
			}
		})
	}
}
