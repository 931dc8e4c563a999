package nodeinfo

import (
	"runtime"
	"testing"
)

func TestLabels(t *testing.T) {
	got := Labels("n1", map[string]string{"team": "a", "kubernetes.io/hostname": "spoofed"})
	want := map[string]string{
		"team": "a", "kubernetes.io/hostname": "n1",
		"kubernetes.io/os": runtime.GOOS, "kubernetes.io/arch": runtime.GOARCH,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestValidateNodeLabels(t *testing.T) {
	tests := []struct {
		key    string
		wantOK bool
	}{
		{"team", true},
		{"example.com/rack", true},
		{"kubernetes.io/hostname", true},
		{"topology.kubernetes.io/zone", true},
		{"node.kubernetes.io/instance-type", true},
		{"node.kubernetes.io/anything", true},
		{"kubelet.kubernetes.io/anything", true},
		{"node-role.kubernetes.io/worker", false},
		{"node-restriction.kubernetes.io/pool", false},
		{"kubernetes.io/made-up", false},
		{"foo.k8s.io/bar", false},
	}
	for _, tt := range tests {
		err := ValidateNodeLabels(map[string]string{tt.key: "v"})
		if (err == nil) != tt.wantOK {
			t.Errorf("ValidateNodeLabels(%s) = %v, want ok=%v", tt.key, err, tt.wantOK)
		}
	}
}
