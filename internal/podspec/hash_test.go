package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestContainerHash(t *testing.T) {
	a := v1.Container{Name: "app", Image: "busybox:1"}
	b := a
	b.Env = []v1.EnvVar{{Name: "X", Value: "y"}}
	c := a
	c.Image = "busybox:2"
	if ContainerHash(&a) != ContainerHash(&b) {
		t.Error("fields that cannot change altered the hash")
	}
	if ContainerHash(&a) == ContainerHash(&c) {
		t.Error("an image change kept the hash")
	}
	same := a
	if ContainerHash(&a) != ContainerHash(&same) {
		t.Error("hash is not stable")
	}
}
