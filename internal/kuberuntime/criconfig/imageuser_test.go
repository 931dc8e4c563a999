package criconfig

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

func TestImageUserAndRunAsNonRoot(t *testing.T) {
	nonRoot := func(user *int64) podtest.Option {
		return podtest.Modify("app", func(c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: user}
		})
	}
	tests := []struct {
		name    string
		pod     *v1.Pod
		image   *runtimeapi.Image
		wantErr string // empty: allowed
		wantUID *int64
	}{
		{name: "image without a user is root", pod: podtest.NewPod(nonRoot(nil)), image: &runtimeapi.Image{Id: "sha256:1"},
			wantErr: `container has runAsNonRoot and image will run as root (pod: "web_default(uid-1)", container: app)`},
		{name: "image status unknown is root", pod: podtest.NewPod(nonRoot(nil)),
			wantErr: "container has runAsNonRoot and image will run as root"},
		{name: "image uid 0", pod: podtest.NewPod(nonRoot(nil)), image: &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 0}},
			wantErr: "container has runAsNonRoot and image will run as root"},
		{name: "image uid 1000", pod: podtest.NewPod(nonRoot(nil)), image: &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1000}},
			wantUID: ptr.To[int64](1000)},
		{name: "image user name", pod: podtest.NewPod(nonRoot(nil)), image: &runtimeapi.Image{Username: "nobody"},
			wantErr: `container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: "web_default(uid-1)", container: app)`},
		{name: "runAsUser overrides a root image", pod: podtest.NewPod(nonRoot(ptr.To[int64](1000))), image: &runtimeapi.Image{},
			wantUID: ptr.To[int64](1000)},
		{name: "runAsUser 0", pod: podtest.NewPod(nonRoot(ptr.To[int64](0))), image: &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1000}},
			wantErr: "container's runAsUser breaks non-root policy"},
		{name: "root image without runAsNonRoot", pod: podtest.NewPod(), image: &runtimeapi.Image{}, wantUID: ptr.To[int64](0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uid, user := ImageUser(tt.image)
			cfg, err := ContainerConfig(tt.pod, &tt.pod.Spec.Containers[0], ContainerOptions{ImageUID: uid, ImageUser: user})
			if tt.wantErr != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want a *ConfigError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ContainerConfig: %v", err)
			}
			if got := cfg.Linux.SecurityContext.RunAsUser; got == nil || got.Value != *tt.wantUID {
				t.Fatalf("runAsUser = %v, want %d", got, *tt.wantUID)
			}
		})
	}
}
