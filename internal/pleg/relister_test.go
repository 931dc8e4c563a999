package pleg

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fake "k8s.io/cri-api/pkg/apis/testing"
	kubetypes "k8s.io/kubelet/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nodelet/nodelet/internal/cri"
)

const testNode = "node-a"

type eventPod = event.TypedGenericEvent[*corev1.Pod]

type env struct {
	ctx   context.Context
	rt    *cri.Client
	fake  *fake.FakeRuntimeService
	clock *testingclock.FakeClock
	r     *Relister
}

func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	fr := fake.NewFakeRuntimeService()
	rt, err := cri.New(fr, fake.NewFakeImageService(), cri.Options{NodeName: testNode})
	if err != nil {
		t.Fatalf("cri.New: %v", err)
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts.Clock = clk
	r, err := New(rt, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &env{ctx: context.Background(), rt: rt, fake: fr, clock: clk, r: r}
}

// runPod starts a sandbox and one running container for pod uid and
// returns their IDs.
func (e *env) runPod(t testing.TB, uid string) (sandboxID, containerID string) {
	t.Helper()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod-" + uid, Namespace: "ns", Uid: uid},
		Labels:   podLabels(uid),
	}
	sb, err := e.rt.RunPodSandbox(e.ctx, cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	labels := podLabels(uid)
	labels[kubetypes.KubernetesContainerNameLabel] = "app"
	id, err := e.rt.CreateContainer(e.ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Labels:   labels,
	}, cfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := e.rt.StartContainer(e.ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return sb, id
}

// relist relists and returns the pods of the events sent.
func (e *env) relist(t *testing.T) []*corev1.Pod {
	t.Helper()
	if err := e.r.Relist(e.ctx); err != nil {
		t.Fatalf("Relist: %v", err)
	}
	return drain(e.r.Events())
}

func drain(ch <-chan eventPod) []*corev1.Pod {
	var pods []*corev1.Pod
	for {
		select {
		case ev := <-ch:
			pods = append(pods, ev.Object)
		default:
			return pods
		}
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name+"/"+string(p.UID))
	}
	return out
}

func TestRelistReportsEachLifecycleChangeOnce(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	sb, id := e.runPod(t, "u1")
	e.runPod(t, "u2")

	g.Expect(names(e.relist(t))).To(ConsistOf("ns/pod-u1/u1", "ns/pod-u2/u2"), "the first relist reports every pod")
	g.Expect(e.relist(t)).To(BeEmpty(), "nothing changed")

	g.Expect(e.rt.StopContainer(e.ctx, id, 0)).To(Succeed())
	g.Expect(names(e.relist(t))).To(Equal([]string{"ns/pod-u1/u1"}), "container exited")
	g.Expect(e.relist(t)).To(BeEmpty())

	g.Expect(e.rt.RemoveContainer(e.ctx, id)).To(Succeed())
	g.Expect(names(e.relist(t))).To(Equal([]string{"ns/pod-u1/u1"}), "container removed")

	g.Expect(e.rt.StopPodSandbox(e.ctx, sb)).To(Succeed())
	g.Expect(names(e.relist(t))).To(Equal([]string{"ns/pod-u1/u1"}), "sandbox not ready")

	g.Expect(e.rt.RemovePodSandbox(e.ctx, sb)).To(Succeed())
	g.Expect(names(e.relist(t))).To(Equal([]string{"ns/pod-u1/u1"}), "pod gone, reported from the previous relist")
	g.Expect(e.r.Snapshot()).NotTo(HaveKey(types.UID("u1")))
	g.Expect(e.relist(t)).To(BeEmpty())
}

func TestRelistIgnoresObjectsOfOthers(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	e.fake.SetFakeSandboxes([]*fake.FakePodSandbox{{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id: "kubelet-sb", State: ready, Labels: podLabels("foreign"), Metadata: &runtimeapi.PodSandboxMetadata{Name: "x"}}}})
	g.Expect(e.relist(t)).To(BeEmpty())

	e.fake.Sandboxes["kubelet-sb"].State = notReady
	g.Expect(e.relist(t)).To(BeEmpty())
}

func TestEventsThatDoNotFitAreSentWithTheNextRelist(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{ChannelCapacity: 1})
	e.runPod(t, "u1")
	e.runPod(t, "u2")

	g.Expect(e.r.Relist(e.ctx)).To(Succeed())
	first := drain(e.r.Events())
	g.Expect(first).To(HaveLen(1))

	second := e.relist(t)
	g.Expect(second).To(HaveLen(1), "the pending pod is delivered although nothing changed since")
	g.Expect(names(append(first, second...))).To(ConsistOf("ns/pod-u1/u1", "ns/pod-u2/u2"))
	g.Expect(e.relist(t)).To(BeEmpty())
}

func TestRelistErrorKeepsThePreviousStateAndHealthFollowsSuccess(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{HealthThreshold: 3 * time.Minute})
	g.Expect(e.r.Healthy()).To(MatchError(ContainSubstring("not relisted successfully yet")))

	_, id := e.runPod(t, "u1")
	g.Expect(e.relist(t)).To(HaveLen(1))
	g.Expect(e.r.Healthy()).To(Succeed())

	g.Expect(e.rt.StopContainer(e.ctx, id, 0)).To(Succeed())
	e.fake.InjectError("ListContainers", status.Error(codes.Unavailable, "runtime down"))
	g.Expect(e.r.Relist(e.ctx)).To(MatchError(ContainSubstring("relisting containers")))
	g.Expect(drain(e.r.Events())).To(BeEmpty())

	// The change is found by the next successful relist.
	g.Expect(names(e.relist(t))).To(Equal([]string{"ns/pod-u1/u1"}))

	e.clock.Step(2 * time.Minute)
	g.Expect(e.r.Healthy()).To(Succeed())
	e.clock.Step(2 * time.Minute)
	g.Expect(e.r.Healthy()).To(MatchError(ContainSubstring("last successful relist 4m0s ago")))
	g.Expect(e.r.Relist(e.ctx)).To(Succeed())
	g.Expect(e.r.Healthy()).To(Succeed())
}

func TestStartRelistsEveryPeriodSurvivesErrorsAndStops(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{RelistPeriod: time.Second})
	g.Expect(e.r.NeedLeaderElection()).To(BeFalse())
	e.fake.InjectError("ListPodSandbox", status.Error(codes.Unavailable, "runtime starting"))

	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error)
	go func() { done <- e.r.Start(ctx) }()

	// The first relist fails; the next period's succeeds.
	g.Eventually(e.clock.HasWaiters).Should(BeTrue())
	g.Consistently(e.r.Healthy, 50*time.Millisecond).ShouldNot(Succeed())
	e.runPod(t, "u1")
	e.clock.Step(time.Second)
	g.Eventually(e.r.Events()).Should(Receive())
	g.Expect(e.r.Healthy()).To(Succeed())

	cancel()
	g.Eventually(done).Should(Receive(BeNil()))
}

// listsOf is a Lister that hands out the objects it holds, as cri's brief
// lister hands out the unchanged objects of its last list again, and in
// another order each time, as containerd lists.
type listsOf struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	calls      int
}

func (l *listsOf) ListPodSandboxes(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return rotated(l.sandboxes, l.calls), nil
}

func (l *listsOf) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	l.calls++
	return rotated(l.containers, l.calls), nil
}

// rotated returns a copy of s rotated left by n.
func rotated[T any](s []T, n int) []T {
	if len(s) == 0 {
		return nil
	}
	n %= len(s)
	return append(slices.Clone(s[n:]), s[:n]...)
}

func TestRelistOfTheSameObjectsReusesItsSnapshot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	l := &listsOf{
		sandboxes: []*runtimeapi.PodSandbox{sandbox("sb1", "u1", ready), sandbox("sb2", "u2", ready)},
		containers: []*runtimeapi.Container{
			container("c1", "sb1", "u1", running), container("c2", "sb2", "u2", running), container("c3", "sb2", "u2", running),
		},
	}
	r, err := New(l, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Relist(ctx)).To(Succeed())
	g.Expect(names(drain(r.Events()))).To(ConsistOf("ns/pod-u1/u1", "ns/pod-u2/u2"))
	first := r.Record("u1")

	g.Expect(r.Relist(ctx)).To(Succeed())
	g.Expect(drain(r.Events())).To(BeEmpty())
	g.Expect(r.Listed()).To(Equal(uint64(2)), "a relist that reuses its snapshot still counts")
	g.Expect(r.Record("u1")).To(BeIdenticalTo(first), "the same objects made a new snapshot")

	// A new object in place of one listed before is a change.
	l.containers[0] = container("c1", "sb1", "u1", exited)
	g.Expect(r.Relist(ctx)).To(Succeed())
	g.Expect(names(drain(r.Events()))).To(Equal([]string{"ns/pod-u1/u1"}))
	g.Expect(r.Record("u1").Objects).To(HaveKeyWithValue("c1", ObjectState{Kind: KindContainer, State: "CONTAINER_EXITED"}))
	g.Expect(r.Listed()).To(Equal(uint64(3)))
}

func TestListedTellsTheSameObjectsInAnyOrder(t *testing.T) {
	a, b, c, d := new(int), new(int), new(int), new(int)
	for name, tc := range map[string]struct {
		remembered, list []*int
		want             bool
	}{
		"none":                     {remembered: []*int{}, list: nil, want: true},
		"the same, in order":       {remembered: []*int{a, b, c}, list: []*int{a, b, c}, want: true},
		"the same, in other order": {remembered: []*int{a, b, c}, list: []*int{c, a, b}, want: true},
		"one replaced":             {remembered: []*int{a, b, c}, list: []*int{a, d, c}},
		"one fewer":                {remembered: []*int{a, b, c}, list: []*int{a, c}},
		"one more":                 {remembered: []*int{a, b, c}, list: []*int{a, b, c, d}},
		"one twice, one missing":   {remembered: []*int{a, b, c}, list: []*int{a, b, b}},
		"twice before, and now":    {remembered: []*int{a, b, b}, list: []*int{b, a, b}},
	} {
		t.Run(name, func(t *testing.T) {
			var l listed[*int]
			if l.same(tc.list) {
				t.Fatal("same before anything was remembered")
			}
			l.remember(tc.remembered)
			// Twice: a check must not depend on the one before.
			for range 2 {
				if got := l.same(tc.list); got != tc.want {
					t.Errorf("same = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
