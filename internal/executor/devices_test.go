package executor

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// blockVolumes gives every container one block device, or fails.
type blockVolumes struct {
	noVolumes
	err error
}

func (b blockVolumes) Devices(*v1.Pod, *v1.Container) ([]*runtimeapi.Device, error) {
	if b.err != nil {
		return nil, b.err
	}
	return []*runtimeapi.Device{{ContainerPath: "/dev/xvda", HostPath: "/dev/loop7", Permissions: "mrw"}}, nil
}

// TestStartGivesContainersTheirBlockDevices: the volume manager's devices
// of a container's volumeDevices reach its CRI config; an error there keeps
// the container from being created.
func TestStartGivesContainersTheirBlockDevices(t *testing.T) {
	for _, fail := range []bool{false, true} {
		g := NewWithT(t)
		ctx := context.Background()
		fake := &reportingRuntime{FakeRuntimeService: fakeruntime.NewFakeRuntimeService(), status: &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}}
		rt, err := cri.New(fake, fakeruntime.NewFakeImageService(), cri.Options{NodeName: fakeNode})
		g.Expect(err).NotTo(HaveOccurred())
		e, _ := newFakeExecutor(t)
		vols := blockVolumes{}
		if fail {
			vols.err = errors.New("volume data is not set up")
		}
		e.Runtime, e.Volumes = rt, vols
		pod := fakePod("app")
		st := state.NewPodState(pod.UID)
		_ = e.Start(ctx, pod, state.PodRuntime{}, &st, startPlan(pod), noSave)
		if fail {
			g.Expect(fake.configs).To(BeEmpty(), "no container without its devices")
			continue
		}
		g.Expect(fake.configs).To(HaveLen(1))
		g.Expect(fake.configs[0].Devices).To(ConsistOf(BeComparableTo(
			&runtimeapi.Device{ContainerPath: "/dev/xvda", HostPath: "/dev/loop7", Permissions: "mrw"}, protoEqual())))
	}
}
