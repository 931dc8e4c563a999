package gc

import "testing"

func TestNormalizeReference(t *testing.T) {
	for ref, want := range map[string]string{
		"busybox":              "docker.io/library/busybox:latest",
		"busybox:1.36":         "docker.io/library/busybox:1.36",
		"library/busybox:1.36": "docker.io/library/busybox:1.36",
		"someone/tool":         "docker.io/someone/tool:latest",
		"registry.k8s.io/e2e-test-images/kitten:1.8": "registry.k8s.io/e2e-test-images/kitten:1.8",
		"localhost/data":                                 "localhost/data:latest",
		"127.0.0.1:5000/data:2":                          "127.0.0.1:5000/data:2",
		"127.0.0.1:5000/data":                            "127.0.0.1:5000/data:latest",
		"quay.io/x/y@sha256:0123456789abcdef":            "quay.io/x/y@sha256:0123456789abcdef",
		"alpine@sha256:0123456789abcdef":                 "docker.io/library/alpine@sha256:0123456789abcdef",
		"registry.example:5000/team/app:v1@sha256:01234": "registry.example:5000/team/app@sha256:01234",
	} {
		if got := NormalizeReference(ref); got != want {
			t.Errorf("NormalizeReference(%q) = %q, want %q", ref, got, want)
		}
	}
}
