package executor

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// preparedClaims gives each container that uses a claim one CDI device
// named after it.
type preparedClaims struct{ unprepared []types.UID }

func (*preparedClaims) Prepare(context.Context, *v1.Pod) error { return nil }

func (p *preparedClaims) Unprepare(_ context.Context, pod types.UID) error {
	p.unprepared = append(p.unprepared, pod)
	return nil
}

func (*preparedClaims) CDIDevices(_ *v1.Pod, c *v1.Container) ([]string, error) {
	if len(c.Resources.Claims) == 0 {
		return nil, nil
	}
	return []string{"example.com/dev=" + c.Name}, nil
}

// TestStartGivesContainersTheirCDIDevices: the CDI devices of the claims a
// container uses reach its CRI config; a runtime that does not apply CDI
// devices gets no sandbox for the pod.
func TestStartGivesContainersTheirCDIDevices(t *testing.T) {
	for _, cdi := range []bool{true, false} {
		g := NewWithT(t)
		ctx := context.Background()
		fake := &reportingRuntime{FakeRuntimeService: fakeruntime.NewFakeRuntimeService(), status: &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}}
		rt, err := cri.New(fake, fakeruntime.NewFakeImageService(), cri.Options{NodeName: fakeNode})
		g.Expect(err).NotTo(HaveOccurred())
		e, _ := newFakeExecutor(t)
		claims := &preparedClaims{}
		e.Runtime, e.Claims, e.Features = rt, claims, fixedFeatures{f: cri.Features{CDI: cdi}}
		pod := fakePod("app", "sidecar")
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
		pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
		st := state.NewPodState(pod.UID)
		err = e.Start(ctx, pod, state.PodRuntime{}, &st, startPlan(pod), noSave)
		if !cdi {
			g.Expect(err).To(MatchError(ContainSubstring("the container runtime does not apply CDI devices")))
			g.Expect(fake.configs).To(BeEmpty())
			sandboxes, err := fake.ListPodSandbox(ctx, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sandboxes).To(BeEmpty(), "no sandbox for a pod whose devices would be missing")
			g.Expect(e.Recorder.(*record.FakeRecorder).Events).To(Receive(ContainSubstring("FailedPrepareDynamicResources")))
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fake.configs).To(HaveLen(2))
		for _, cfg := range fake.configs {
			if cfg.GetMetadata().GetName() == "app" {
				g.Expect(cfg.CDIDevices).To(ConsistOf(BeComparableTo(&runtimeapi.CDIDevice{Name: "example.com/dev=app"}, protoEqual())))
			} else {
				g.Expect(cfg.CDIDevices).To(BeEmpty())
			}
		}
		g.Expect(e.UnprepareClaims(ctx, pod.UID)).To(Succeed())
		g.Expect(claims.unprepared).To(Equal([]types.UID{pod.UID}))
	}
}
