package criconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

func hostUsers(b *bool) podtest.Option {
	return func(pod *v1.Pod) { pod.Spec.HostUsers = b }
}

func TestCheckUserNamespace(t *testing.T) {
	hostNet := func(pod *v1.Pod) { pod.Spec.HostNetwork = true }
	hostPID := func(pod *v1.Pod) { pod.Spec.HostPID = true }
	hostIPC := func(pod *v1.Pod) { pod.Spec.HostIPC = true }
	supported := UserNamespaceSupport{Handler: true}
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		handler string
		support UserNamespaceSupport
		wantErr string
	}{
		{name: "hostUsers unset on a runtime without userns", pod: podtest.NewPod()},
		{name: "hostUsers true on a runtime without userns", pod: podtest.NewPod(hostUsers(ptr.To(true)))},
		{name: "hostUsers false, default handler without userns", pod: podtest.NewPod(hostUsers(ptr.To(false))),
			wantErr: "can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{name: "hostUsers false, RuntimeClass handler without userns", pod: podtest.NewPod(hostUsers(ptr.To(false))), handler: "runsc",
			wantErr: "can't set `spec.hostUsers: false`, RuntimeClass handler \"runsc\" does not support user namespaces"},
		{name: "hostUsers false, supported", pod: podtest.NewPod(hostUsers(ptr.To(false))), support: supported},
		{name: "with hostPID", pod: podtest.NewPod(hostUsers(ptr.To(false)), hostPID), support: supported,
			wantErr: "can't set `spec.hostUsers: false` with `spec.hostPID: true`"},
		{name: "with hostIPC", pod: podtest.NewPod(hostUsers(ptr.To(false)), hostIPC), support: supported,
			wantErr: "can't set `spec.hostUsers: false` with `spec.hostIPC: true`"},
		{name: "with hostNetwork, runtime cannot", pod: podtest.NewPod(hostUsers(ptr.To(false)), hostNet), support: supported,
			wantErr: "can't set `spec.hostUsers: false` with `spec.hostNetwork: true`, runtime does not support user namespaces with the host network"},
		{name: "with hostNetwork, runtime can", pod: podtest.NewPod(hostUsers(ptr.To(false)), hostNet),
			support: UserNamespaceSupport{Handler: true, HostNetwork: true}},
		{name: "host namespaces without a user namespace", pod: podtest.NewPod(hostPID, hostIPC, hostNet)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckUserNamespace(tc.pod, tc.handler, tc.support)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("CheckUserNamespace = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func TestUserNamespaceInConfigs(t *testing.T) {
	ids := IDRange{First: 3 * 65536, Length: 65536}
	podMapping := []*runtimeapi.IDMapping{{HostId: 3 * 65536, ContainerId: 0, Length: 65536}}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want *runtimeapi.UserNamespace
	}{
		{name: "unset: the node's", pod: podtest.NewPod(), want: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "true: the node's", pod: podtest.NewPod(hostUsers(ptr.To(true))), want: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "false: the pod's own, mapped", pod: podtest.NewPod(hostUsers(ptr.To(false))),
			want: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: podMapping, Gids: podMapping}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			userns := UserNamespaceOptions(tc.pod, ids)
			if diff := cmp.Diff(tc.want, userns, protocmp.Transform()); diff != "" {
				t.Fatalf("UserNamespaceOptions (-want +got):\n%s", diff)
			}
			sb, err := SandboxConfig(tc.pod, SandboxOptions{UserNamespace: userns})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions, protocmp.Transform()); diff != "" {
				t.Errorf("sandbox user namespace (-want +got):\n%s", diff)
			}
			mounts := []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/var/lib/nodelet/pods/x/volumes/data"}}
			c, err := ContainerConfig(tc.pod, &tc.pod.Spec.Containers[0], ContainerOptions{UserNamespace: userns, Mounts: mounts})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.Linux.SecurityContext.NamespaceOptions.UsernsOptions, protocmp.Transform()); diff != "" {
				t.Errorf("container user namespace (-want +got):\n%s", diff)
			}
			var wantIDs []*runtimeapi.IDMapping
			if tc.want.Mode == runtimeapi.NamespaceMode_POD {
				wantIDs = podMapping
			}
			m := c.Mounts[0]
			if diff := cmp.Diff(wantIDs, m.UidMappings, protocmp.Transform()); diff != "" {
				t.Errorf("mount uid mappings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantIDs, m.GidMappings, protocmp.Transform()); diff != "" {
				t.Errorf("mount gid mappings (-want +got):\n%s", diff)
			}
			if len(mounts[0].UidMappings) != 0 {
				t.Error("the caller's mounts were changed")
			}
		})
	}
}

func TestSandboxResourcesAndOverhead(t *testing.T) {
	res := func(cpuReq, cpuLim, memLim string) podtest.Option {
		return func(pod *v1.Pod) {
			r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
			if cpuReq != "" {
				r.Requests[v1.ResourceCPU] = resource.MustParse(cpuReq)
			}
			if cpuLim != "" {
				r.Limits[v1.ResourceCPU] = resource.MustParse(cpuLim)
			}
			if memLim != "" {
				r.Limits[v1.ResourceMemory] = resource.MustParse(memLim)
			}
			pod.Spec.Containers[0].Resources = r
		}
	}
	overhead := func(cpu, mem string) podtest.Option {
		return func(pod *v1.Pod) {
			pod.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
		}
	}
	for _, tc := range []struct {
		name                  string
		pod                   *v1.Pod
		wantRes, wantOverhead *runtimeapi.LinuxContainerResources
	}{
		{name: "best effort", pod: podtest.NewPod(),
			wantRes:      &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000},
			wantOverhead: &runtimeapi.LinuxContainerResources{}},
		{name: "requests and limits", pod: podtest.NewPod(res("250m", "500m", "64Mi")),
			wantRes:      &runtimeapi.LinuxContainerResources{CpuShares: 256, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 64 << 20},
			wantOverhead: &runtimeapi.LinuxContainerResources{}},
		{name: "limit only: shares from the limit", pod: podtest.NewPod(res("", "1", "")),
			wantRes:      &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuPeriod: 100000, CpuQuota: 100000},
			wantOverhead: &runtimeapi.LinuxContainerResources{}},
		{name: "overhead: not in the pod's resources, requests equal limits", pod: podtest.NewPod(res("250m", "500m", "64Mi"), overhead("100m", "32Mi")),
			wantRes:      &runtimeapi.LinuxContainerResources{CpuShares: 256, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 64 << 20},
			wantOverhead: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuPeriod: 100000, CpuQuota: 10000, MemoryLimitInBytes: 32 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := SandboxConfig(tc.pod, SandboxOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantRes, sb.Linux.Resources, protocmp.Transform()); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOverhead, sb.Linux.Overhead, protocmp.Transform()); diff != "" {
				t.Errorf("overhead (-want +got):\n%s", diff)
			}
		})
	}
}
