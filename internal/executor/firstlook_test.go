package executor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// spendFirstLook makes every Observe of e list, for the tests of Observe's
// own lists.
func spendFirstLook(e *Executor) { e.firstLook.once.Do(func() {}) }

// lists counts the list calls among calls.
func lists(calls []string) int {
	return len(slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return !strings.HasPrefix(c, "List") }))
}

// sortedRuntime sorts a runtime's containers by ID: the fake runtime lists
// them in map order.
func sortedRuntime(r state.PodRuntime) state.PodRuntime {
	slices.SortFunc(r.Containers, func(a, b state.Container) int { return strings.Compare(a.ID, b.ID) })
	return r
}

func TestFirstObserveOfEachNameTakesOneLookAtTheNode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// A previous process ran pod "web" and left a sandbox of "api" with an
	// old UID.
	before, rs := newFakeExecutor(t)
	spendFirstLook(before)
	web := fakePod("app", "sidecar")
	webState := state.NewPodState(web.UID)
	runPod(t, ctx, before, web, &webState)
	oldAPI := fakePod("app")
	oldAPI.Name, oldAPI.UID = "api", "uid-old"
	oldState := state.NewPodState(oldAPI.UID)
	runPod(t, ctx, before, oldAPI, &oldState)
	listedWeb, err := before.Observe(ctx, web)
	g.Expect(err).NotTo(HaveOccurred())

	// The new process.
	e := newFakeExecutorOn(t, rs)
	n := len(rs.GetCalls())
	obs, err := e.Observe(ctx, web)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lists(rs.GetCalls()[n:])).To(Equal(2), "one list of the node's sandboxes and one of its containers")
	g.Expect(sortedRuntime(obs.Runtime)).To(Equal(sortedRuntime(listedWeb.Runtime)), "what the pod's own lists see")
	g.Expect(obs.StaleSandboxes).To(BeEmpty())

	api := fakePod("app")
	api.Name, api.UID = "api", "uid-new"
	n = len(rs.GetCalls())
	obs, err = e.Observe(ctx, api)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lists(rs.GetCalls()[n:])).To(BeZero(), "the name's first Observe lists nothing")
	g.Expect(obs.Runtime.Empty()).To(BeTrue())
	g.Expect(obs.StaleSandboxes).To(HaveLen(1), "the old pod's sandbox")
	g.Expect(obs.StaleSandboxes[0].GetLabels()).To(HaveKeyWithValue(kubetypes.KubernetesPodUIDLabel, "uid-old"))
	g.Expect(obs.StaleContainers).To(HaveLen(1))

	fresh := fakePod("app")
	fresh.Name, fresh.UID = "fresh", "uid-fresh"
	n = len(rs.GetCalls())
	obs, err = e.Observe(ctx, fresh)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rs.GetCalls()[n:]).To(BeEmpty(), "a name the look did not see has nothing")
	g.Expect(obs.Runtime.Empty()).To(BeTrue())

	// A name's later Observes list: its worker may have made objects.
	freshState := state.NewPodState(fresh.UID)
	g.Expect(e.Start(ctx, fresh, obs.Runtime, &freshState, startPlan(fresh), noSave)).To(Succeed())
	for _, pod := range []*v1.Pod{web, api, fresh} {
		n = len(rs.GetCalls())
		_, err = e.Observe(ctx, pod)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rs.GetCalls()[n:]).To(ContainElement("ListPodSandbox"), pod.Name)
	}
	obs, err = e.Observe(ctx, fresh)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byName(obs.Runtime)).To(Equal(map[string]state.ContainerState{"app": state.ContainerRunning}))
}

func TestFirstLookExpires(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	e.Clock = clk
	a := fakePod("app")
	_, err := e.Observe(ctx, a)
	g.Expect(err).NotTo(HaveOccurred())

	clk.Step(firstLookTTL + 1)
	b := fakePod("app")
	b.Name = "other"
	n := len(rs.GetCalls())
	_, err = e.Observe(ctx, b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rs.GetCalls()[n:]).To(Equal([]string{"ListPodSandbox"}), "after the look's time, every name lists")
	g.Expect(e.firstLook.byName).To(BeNil(), "and the look is let go")
}

// failingLists fails the first n list calls.
type failingLists struct {
	cri.Runtime
	n *int
}

func (r failingLists) ListPodSandboxes(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if *r.n > 0 {
		*r.n--
		return nil, errors.New("runtime unavailable")
	}
	return r.Runtime.ListPodSandboxes(ctx, f)
}

func TestFailedFirstLookListsEachName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	fails := 1
	e.Runtime = failingLists{Runtime: e.Runtime, n: &fails}
	pod := fakePod("app")
	obs, err := e.Observe(ctx, pod)
	g.Expect(err).NotTo(HaveOccurred(), "the pod's own list still answers")
	g.Expect(obs.Runtime.Empty()).To(BeTrue())
	g.Expect(rs.GetCalls()).To(Equal([]string{"ListPodSandbox"}), "the failed look reached the fake runtime no further")
}

func TestGroupByPodName(t *testing.T) {
	labels := func(ns, name, uid string) map[string]string {
		return map[string]string{
			kubetypes.KubernetesPodNamespaceLabel: ns,
			kubetypes.KubernetesPodNameLabel:      name,
			kubetypes.KubernetesPodUIDLabel:       uid,
		}
	}
	sb := func(id, ns, name, uid string) *runtimeapi.PodSandbox {
		return &runtimeapi.PodSandbox{Id: id, Labels: labels(ns, name, uid)}
	}
	c := func(id, ns, name, uid string) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, Labels: labels(ns, name, uid)}
	}
	ids := func(o *namedObjects) []string {
		var out []string
		for _, s := range o.sandboxes {
			out = append(out, "sb:"+s.Id)
		}
		for _, c := range o.containers {
			out = append(out, "c:"+c.Id)
		}
		return out
	}
	tests := []struct {
		name       string
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		want       map[types.NamespacedName][]string
	}{
		{name: "nothing", want: map[types.NamespacedName][]string{}},
		{
			name:       "one pod",
			sandboxes:  []*runtimeapi.PodSandbox{sb("s1", "ns", "web", "u1")},
			containers: []*runtimeapi.Container{c("c1", "ns", "web", "u1"), c("c2", "ns", "web", "u1")},
			want:       map[types.NamespacedName][]string{{Namespace: "ns", Name: "web"}: {"sb:s1", "c:c1", "c:c2"}},
		},
		{
			name:       "two UIDs of one name stay together, the same name in another namespace apart",
			sandboxes:  []*runtimeapi.PodSandbox{sb("s1", "ns", "web", "u1"), sb("s2", "ns", "web", "u2"), sb("s3", "other", "web", "u3")},
			containers: []*runtimeapi.Container{c("c1", "ns", "web", "u1")},
			want: map[types.NamespacedName][]string{
				{Namespace: "ns", Name: "web"}:    {"sb:s1", "sb:s2", "c:c1"},
				{Namespace: "other", Name: "web"}: {"sb:s3"},
			},
		},
		{
			name:       "a container without its sandbox",
			containers: []*runtimeapi.Container{c("c1", "ns", "web", "u1")},
			want:       map[types.NamespacedName][]string{{Namespace: "ns", Name: "web"}: {"c:c1"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := map[types.NamespacedName][]string{}
			for k, o := range groupByPodName(tc.sandboxes, tc.containers) {
				got[k] = ids(o)
			}
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}
