package criconfig

import (
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

func TestPodLogDirectory(t *testing.T) {
	const uid = "0f3c2a8e-5b1d-4c7a-9e2f-1a2b3c4d5e6f"
	long := strings.Repeat("a", 253)
	longB := strings.Repeat("a", 252) + "b"
	ns63 := strings.Repeat("n", 63)
	// The longest name that fits as it is: 255 - len("default") - 36 - 2.
	fits := strings.Repeat("f", 255-len("default")-len(uid)-2)
	tests := []struct {
		name, namespace, pod string
		want                 string // "" to check only the rule's invariants
	}{
		{name: "short name is the kubelet's layout", namespace: "default", pod: "web", want: "default_web_" + uid},
		{name: "a name that just fits is kept", namespace: "default", pod: fits, want: "default_" + fits + "_" + uid},
		{name: "one more character is shortened", namespace: "default", pod: fits + "g"},
		{name: "253-character name", namespace: "default", pod: long},
		{name: "253-character name in a 63-character namespace", namespace: ns63, pod: long},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tt.namespace, Name: tt.pod, UID: uid}}
			got := PodLogDirectory("/var/log/pods", pod)
			base := filepath.Base(got)
			if filepath.Dir(got) != "/var/log/pods" {
				t.Errorf("directory %q is not under the root", got)
			}
			if tt.want != "" {
				if base != tt.want {
					t.Errorf("name = %q, want %q", base, tt.want)
				}
				return
			}
			if len(base) != maxLogDirNameLen {
				t.Errorf("shortened name is %d bytes, want %d", len(base), maxLogDirNameLen)
			}
			if !strings.HasPrefix(base, tt.namespace+"_") || !strings.HasSuffix(base, "_"+uid) {
				t.Errorf("name %q does not keep the namespace and the UID", base)
			}
			if strings.Count(base, "_") != 2 {
				t.Errorf("name %q must keep exactly the two separators", base)
			}
			if again := PodLogDirectory("/var/log/pods", pod.DeepCopy()); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		})
	}
	t.Run("names differing only after the cut stay distinct", func(t *testing.T) {
		a := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: long, UID: uid}}
		b := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: longB, UID: uid}}
		if PodLogDirectory("/p", a) == PodLogDirectory("/p", b) {
			t.Errorf("both map to %q", PodLogDirectory("/p", a))
		}
	})
}

func TestPodDesc(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"}}
	if got := podspec.PodDesc(pod); got != "web_default(uid-1)" {
		t.Errorf("PodDesc = %q, want web_default(uid-1)", got)
	}
}
