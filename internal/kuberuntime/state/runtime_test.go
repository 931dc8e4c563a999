package state

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

func TestFromCRI(t *testing.T) {
	ns := func(d time.Duration) int64 { return podtest.At(d).UnixNano() }
	rt := FromCRI(
		[]*runtimeapi.PodSandboxStatus{
			{Id: "old", Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 0}, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: ns(0)},
			nil,
			{Id: "new", Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 1}, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: ns(time.Minute),
				Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.5", AdditionalIps: []*runtimeapi.PodIP{{Ip: "fd00::5"}}},
				Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
					Network: runtimeapi.NamespaceMode_NODE}}}},
		},
		[]*runtimeapi.ContainerStatus{{
			Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 2}, State: runtimeapi.ContainerState_CONTAINER_EXITED,
			CreatedAt: ns(time.Second), StartedAt: ns(2 * time.Second), FinishedAt: ns(3 * time.Second), ExitCode: 1,
			Image: &runtimeapi.ImageSpec{Image: "sha256:abc", UserSpecifiedImage: "busybox:1"}, ImageRef: "docker.io/library/busybox@sha256:abc",
			Reason: "Error", Message: "boom",
			Labels: map[string]string{SandboxIDLabel: "new", ContainerHashLabel: "beef"},
			User:   &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 1000, SupplementalGroups: []int64{1000, 4000}}},
		}},
	)
	want := PodRuntime{
		Sandboxes: []Sandbox{
			{ID: "new", Attempt: 1, Ready: true, HostNetwork: true, IPs: []string{"10.0.0.5", "fd00::5"}, CreatedAt: podtest.At(time.Minute)},
			{ID: "old", CreatedAt: podtest.T0},
		},
		Containers: []Container{{
			ID: "c1", Name: "app", Attempt: 2, State: ContainerExited, ExitCode: 1, Reason: "Error", Message: "boom",
			CreatedAt: podtest.At(time.Second), StartedAt: podtest.At(2 * time.Second), FinishedAt: podtest.At(3 * time.Second),
			Image: "busybox:1", ImageRef: "docker.io/library/busybox@sha256:abc", SandboxID: "new", Hash: "beef",
			User: &LinuxUser{UID: 1000, GID: 1000, SupplementalGroups: []int64{1000, 4000}},
		}},
	}
	if diff := cmp.Diff(want, rt); diff != "" {
		t.Errorf("FromCRI (-want +got):\n%s", diff)
	}
}
