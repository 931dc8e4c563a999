package executor

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// recordingCgroups records the calls of the executor, and what the
// runtime held at each, in order.
type recordingCgroups struct {
	rs    *fakeruntime.FakeRuntimeService
	calls []string
	// sandboxesAt are how many sandboxes the runtime held at each call.
	sandboxesAt []int
	fail        error
}

func (r *recordingCgroups) note(call string) {
	sbs, _ := r.rs.ListPodSandbox(context.Background(), nil)
	r.calls = append(r.calls, call)
	r.sandboxesAt = append(r.sandboxesAt, len(sbs))
}

func (r *recordingCgroups) PodParent(pod *v1.Pod) string { return "/kp/pod" + string(pod.UID) }
func (r *recordingCgroups) EnsurePod(*v1.Pod) error {
	r.note("ensure")
	return r.fail
}

func (r *recordingCgroups) ResizePod(_ *v1.Pod, update func() error) error {
	r.note("grow")
	if err := update(); err != nil {
		return err
	}
	r.note("shrink")
	return nil
}

func (r *recordingCgroups) RemovePod(context.Context, types.UID) error {
	r.note("remove")
	return nil
}

func TestThePodCgroupIsMadeBeforeItsSandboxAndRemovedAfterIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	cg := &recordingCgroups{rs: rs}
	e.Cgroups = cg
	pod := fakePod("app")
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)

	g.Expect(cg.calls).To(Equal([]string{"ensure"}))
	g.Expect(cg.sandboxesAt).To(Equal([]int{0}), "made before the sandbox")
	sbs, err := rs.ListPodSandbox(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sbs).To(HaveLen(1))
	cfg, err := e.sandboxConfig(pod, 0, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.GetLinux().GetCgroupParent()).To(Equal("/kp/poduid-1"), "the sandbox's parent is the pod's cgroup")

	g.Expect(e.Resize(ctx, pod, nil, &st, noSave)).To(Succeed())
	g.Expect(cg.calls).To(Equal([]string{"ensure", "grow", "shrink"}), "the pod's cgroup is synced even without container resizes")

	for _, c := range rt.Containers {
		g.Expect(rs.StopContainer(ctx, c.ID, 0)).To(Succeed())
	}
	g.Expect(e.RemovePod(ctx, pod, rt)).To(Succeed())
	g.Expect(cg.calls[len(cg.calls)-1]).To(Equal("remove"))
	g.Expect(cg.sandboxesAt[len(cg.sandboxesAt)-1]).To(BeZero(), "removed after the sandboxes")
}

func TestAPodCgroupThatCannotBeMadeFailsTheSandbox(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	e.Cgroups = &recordingCgroups{rs: rs, fail: errors.New("no cgroup for you")}
	pod := fakePod("app")
	st := state.NewPodState(pod.UID)
	g.Expect(e.Start(ctx, pod, state.PodRuntime{}, &st, startPlan(pod), noSave)).To(MatchError(ContainSubstring("no cgroup for you")))
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sbs).To(BeEmpty())
	g.Expect(st.SandboxFailure).NotTo(BeNil())
}
