package csi

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestPaths(t *testing.T) {
	const handleSHA = "d2e8363faaac7ae76def3b14091d8eb5755f6b92e9531627aeec833a8731cc49" // sha256("vol-1")
	tests := []struct {
		name, got, want string
	}{
		{"staging path", stagingPath("/var/lib/kubelet", testDriver, "vol-1"),
			"/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/" + handleSHA + "/globalmount"},
		{"staging record dir", stagingDataDir("/var/lib/kubelet", testDriver, "vol-1"),
			"/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/" + handleSHA},
		{"publish path", publishPath("/var/lib/kubelet", types.UID("1234"), "pv-1"),
			"/var/lib/kubelet/pods/1234/volumes/kubernetes.io~csi/pv-1/mount"},
		{"publish record dir", publishDataDir("/var/lib/kubelet", types.UID("1234"), "pv-1"),
			"/var/lib/kubelet/pods/1234/volumes/kubernetes.io~csi/pv-1"},
		// sha256("vol-1" + "csi.example.com" + "node-a")
		{"attachment name", attachmentName("vol-1", testDriver, testNode),
			"csi-664f93e6befe920d56b73708bbb3eb1888cad5fb3e7203b1b501f466d0bea90f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %s, want %s", tt.got, tt.want)
			}
		})
	}
}

func TestCheckPathElement(t *testing.T) {
	for name, ok := range map[string]bool{
		"pv-1": true, testDriver: true, "": false, ".": false, "..": false, "a/b": false, "a\x00": false,
	} {
		if err := checkPathElement("name", name); (err == nil) != ok {
			t.Errorf("checkPathElement(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
