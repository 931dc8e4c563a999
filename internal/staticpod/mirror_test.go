package staticpod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func decodeOne(t *testing.T, data, origin string) *corev1.Pod {
	t.Helper()
	pods, err := Decode([]byte(data), SourceFile, origin, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	return pods[0]
}

func TestMirror(t *testing.T) {
	static := decodeOne(t, podYAML, "/m/web.yaml")
	static.ResourceVersion = "5"
	static.Status.PodIP = "10.0.0.1"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-uid"}}
	mirror := Mirror(static, node)

	if mirror.UID != "" || mirror.ResourceVersion != "" || mirror.Status.PodIP != "" || mirror.Status.Phase != "" {
		t.Errorf("mirror keeps UID %q, resourceVersion %q or status %+v", mirror.UID, mirror.ResourceVersion, mirror.Status)
	}
	if mirror.Annotations[ConfigMirrorAnnotationKey] != string(static.UID) {
		t.Errorf("config.mirror %q, want the static pod's hash %q", mirror.Annotations[ConfigMirrorAnnotationKey], static.UID)
	}
	if mirror.Name != static.Name || mirror.Namespace != static.Namespace || mirror.Spec.Containers[0].Image != static.Spec.Containers[0].Image {
		t.Errorf("mirror is not a copy: %s %+v", FullName(mirror), mirror.Spec)
	}
	if refs := mirror.OwnerReferences; len(refs) != 1 || refs[0].APIVersion != "v1" || refs[0].Kind != "Node" || refs[0].Name != "node-a" ||
		refs[0].UID != "node-uid" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("owner references %+v", refs)
	}
	if _, ok := static.Annotations[ConfigMirrorAnnotationKey]; ok || static.UID == "" || static.Status.PodIP == "" {
		t.Error("Mirror modified the static pod")
	}
	if !IsMirror(mirror) || IsMirror(static) || !IsStatic(static) {
		t.Errorf("IsMirror(mirror)=%v IsMirror(static)=%v IsStatic(static)=%v", IsMirror(mirror), IsMirror(static), IsStatic(static))
	}
}

func TestIsStatic(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		want        bool
	}{
		{nil, false},
		{map[string]string{ConfigSourceAnnotationKey: SourceAPI}, false},
		{map[string]string{ConfigSourceAnnotationKey: SourceFile}, true},
		{map[string]string{ConfigSourceAnnotationKey: SourceHTTP}, true},
	}
	if IsStatic(nil) || IsMirror(nil) {
		t.Error("a nil pod is static or a mirror")
	}
	for _, tc := range tests {
		if got := IsStatic(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}); got != tc.want {
			t.Errorf("IsStatic(%v) = %v, want %v", tc.annotations, got, tc.want)
		}
	}
}

func TestMirrorCurrent(t *testing.T) {
	static := decodeOne(t, podYAML, "/m/web.yaml")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: types.UID("n")}}
	changed := decodeOne(t, podYAML+"  - name: d\n    image: busybox:1.36\n", "/m/web.yaml")
	now := metav1.Now()
	tests := []struct {
		name   string
		mirror func() *corev1.Pod
		want   bool
	}{
		{"its mirror", func() *corev1.Pod { return Mirror(static, node) }, true},
		{"mirror of another version of the manifest", func() *corev1.Pod { return Mirror(changed, node) }, false},
		{"being deleted", func() *corev1.Pod {
			m := Mirror(static, node)
			m.DeletionTimestamp = &now
			return m
		}, false},
		{"a pod with the name but no mirror annotation", func() *corev1.Pod {
			m := Mirror(static, node)
			delete(m.Annotations, ConfigMirrorAnnotationKey)
			return m
		}, false},
		{"nil", func() *corev1.Pod { return nil }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MirrorCurrent(static, tc.mirror()); got != tc.want {
				t.Errorf("MirrorCurrent = %v, want %v", got, tc.want)
			}
		})
	}
}
