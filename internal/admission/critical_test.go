package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestCriticalPod(t *testing.T) {
	pod := func(priority *int32, annotations map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: annotations}, Spec: v1.PodSpec{Priority: priority}}
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "ordinary", pod: pod(nil, nil)},
		{name: "high but not critical", pod: pod(ptr.To[int32](1000000000), nil)},
		{name: "just below system-cluster-critical", pod: pod(ptr.To[int32](SystemCriticalPriority-1), nil)},
		{name: "system-cluster-critical", pod: pod(ptr.To[int32](2000000000), nil), want: true},
		{name: "system-node-critical", pod: pod(ptr.To[int32](2000001000), nil), want: true},
		{name: "from the API server", pod: pod(nil, map[string]string{"kubernetes.io/config.source": "api"})},
		{name: "static, from a file", pod: pod(nil, map[string]string{"kubernetes.io/config.source": "file"}), want: true},
		{name: "static, from a URL", pod: pod(nil, map[string]string{"kubernetes.io/config.source": "http"}), want: true},
		{name: "mirror", pod: pod(nil, map[string]string{v1.MirrorPodAnnotationKey: "x"}), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CriticalPod(tt.pod); got != tt.want {
				t.Errorf("CriticalPod = %v, want %v", got, tt.want)
			}
		})
	}
}
