package cri

import (
	"github.com/nodelet/nodelet/internal/metrics"

	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fake "k8s.io/cri-api/pkg/apis/testing"
)

const testNode = "node-a"

func newTestClient(t *testing.T) (*Client, *fake.FakeRuntimeService, *fake.FakeImageService) {
	t.Helper()
	rs := fake.NewFakeRuntimeService()
	is := fake.NewFakeImageService()
	c, err := New(rs, is, Options{NodeName: testNode, RuntimeRequestTimeout: time.Minute})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, rs, is
}

func sandboxConfig(name string, labels map[string]string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: "uid-" + name},
		Labels:   labels,
	}
}

func containerConfig(name string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: "busybox:1"},
		Labels:   map[string]string{"io.kubernetes.container.name": name},
	}
}

// foreignObjects puts a sandbox and a running container of another node and
// a sandbox and container without any ownership label into rs.
func foreignObjects(rs *fake.FakeRuntimeService) {
	rs.SetFakeSandboxes([]*fake.FakePodSandbox{
		{PodSandboxStatus: runtimeapi.PodSandboxStatus{Id: "other-node-sb", State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "x"}, Labels: OwnerLabels("node-b")}},
		{PodSandboxStatus: runtimeapi.PodSandboxStatus{Id: "kubelet-sb", State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "y"}, Labels: map[string]string{"io.kubernetes.pod.name": "y"}}},
	})
	rs.SetFakeContainers([]*fake.FakeContainer{
		{SandboxID: "other-node-sb", ContainerStatus: runtimeapi.ContainerStatus{Id: "other-node-c",
			State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Labels: OwnerLabels("node-b")}},
		{SandboxID: "kubelet-sb", ContainerStatus: runtimeapi.ContainerStatus{Id: "kubelet-c",
			State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "c"}}},
	})
}

func TestOwnershipLabels(t *testing.T) {
	g := NewWithT(t)
	g.Expect(IsOwned(OwnerLabels(testNode), testNode)).To(BeTrue())
	g.Expect(IsOwned(OwnerLabels("node-b"), testNode)).To(BeFalse())
	g.Expect(IsOwned(nil, testNode)).To(BeFalse())
	g.Expect(IsOwned(map[string]string{LabelNode: ""}, "")).To(BeFalse())
}

func TestRunAndCreateAddOwnershipWithoutMutatingTheCaller(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rs, _ := newTestClient(t)

	cfg := sandboxConfig("web", map[string]string{"io.kubernetes.pod.name": "web"})
	sb, err := c.RunPodSandbox(ctx, cfg, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Labels).NotTo(HaveKey(LabelNode), "the caller's config must not be modified")
	g.Expect(rs.Sandboxes[sb].Labels).To(HaveKeyWithValue(LabelNode, testNode))
	g.Expect(rs.Sandboxes[sb].Labels).To(HaveKeyWithValue("io.kubernetes.pod.name", "web"))

	ccfg := containerConfig("app")
	id, err := c.CreateContainer(ctx, sb, ccfg, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ccfg.Labels).NotTo(HaveKey(LabelNode))
	g.Expect(rs.Containers[id].Labels).To(HaveKeyWithValue(LabelNode, testNode))

	g.Expect(c.StartContainer(ctx, id)).To(Succeed())
	st, err := c.ContainerStatus(ctx, id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State).To(Equal(runtimeapi.ContainerState_CONTAINER_RUNNING))
}

func TestRunRefusesAConfigClaimedForAnotherNode(t *testing.T) {
	g := NewWithT(t)
	c, rs, _ := newTestClient(t)
	_, err := c.RunPodSandbox(context.Background(), sandboxConfig("web", OwnerLabels("node-b")), "")
	g.Expect(err).To(MatchError(ContainSubstring("another node")))
	g.Expect(rs.Sandboxes).To(BeEmpty())
}

func TestListsReturnOnlyOwnedObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rs, _ := newTestClient(t)
	foreignObjects(rs)
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("web", nil), "")
	g.Expect(err).NotTo(HaveOccurred())
	id, err := c.CreateContainer(ctx, sb, containerConfig("app"), nil)
	g.Expect(err).NotTo(HaveOccurred())

	sandboxes, err := c.ListPodSandboxes(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sandboxes).To(HaveLen(1))
	g.Expect(sandboxes[0].Id).To(Equal(sb))

	containers, err := c.ListContainers(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(containers).To(HaveLen(1))
	g.Expect(containers[0].Id).To(Equal(id))

	// A caller's selector for another node cannot widen the list.
	filter := &runtimeapi.ContainerFilter{LabelSelector: OwnerLabels("node-b")}
	containers, err = c.ListContainers(ctx, filter)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(containers).To(HaveLen(1))
	g.Expect(containers[0].Id).To(Equal(id))
	g.Expect(filter.LabelSelector).To(Equal(OwnerLabels("node-b")), "the caller's filter must not be modified")
}

func TestCallsOnForeignObjectsAreRefusedAndLeaveThemAlone(t *testing.T) {
	ctx := context.Background()
	calls := map[string]func(c *Client, sandboxID, containerID string) error{
		"StopPodSandbox":   func(c *Client, sb, _ string) error { return c.StopPodSandbox(ctx, sb) },
		"RemovePodSandbox": func(c *Client, sb, _ string) error { return c.RemovePodSandbox(ctx, sb) },
		"PodSandboxStatus": func(c *Client, sb, _ string) error { _, err := c.PodSandboxStatus(ctx, sb); return err },
		"CreateContainer": func(c *Client, sb, _ string) error {
			_, err := c.CreateContainer(ctx, sb, containerConfig("intruder"), nil)
			return err
		},
		"StartContainer":  func(c *Client, _, id string) error { return c.StartContainer(ctx, id) },
		"StopContainer":   func(c *Client, _, id string) error { return c.StopContainer(ctx, id, 10) },
		"RemoveContainer": func(c *Client, _, id string) error { return c.RemoveContainer(ctx, id) },
		"ContainerStatus": func(c *Client, _, id string) error { _, err := c.ContainerStatus(ctx, id); return err },
		"UpdateContainerResources": func(c *Client, _, id string) error {
			return c.UpdateContainerResources(ctx, id, &runtimeapi.LinuxContainerResources{CpuShares: 2})
		},
		"ExecSync": func(c *Client, _, id string) error {
			_, _, err := c.ExecSync(ctx, id, []string{"true"}, time.Second)
			return err
		},
	}
	for name, call := range calls {
		for _, owner := range []string{"other-node", "kubelet"} {
			t.Run(name+"/"+owner, func(t *testing.T) {
				g := NewWithT(t)
				c, rs, _ := newTestClient(t)
				foreignObjects(rs)

				err := call(c, owner+"-sb", owner+"-c")
				g.Expect(err).To(MatchError(ErrNotOwned))
				g.Expect(rs.Sandboxes).To(HaveKey(owner + "-sb"))
				g.Expect(rs.Sandboxes[owner+"-sb"].State).To(Equal(runtimeapi.PodSandboxState_SANDBOX_READY))
				g.Expect(rs.Containers).To(HaveLen(2))
				g.Expect(rs.Containers[owner+"-c"].State).To(Equal(runtimeapi.ContainerState_CONTAINER_RUNNING))
			})
		}
	}
}

func TestStopAndRemoveAreIdempotent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rs, _ := newTestClient(t)
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("web", nil), "")
	g.Expect(err).NotTo(HaveOccurred())
	id, err := c.CreateContainer(ctx, sb, containerConfig("app"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.StartContainer(ctx, id)).To(Succeed())

	// Twice each: the second call finds the object already stopped.
	for range 2 {
		g.Expect(c.StopContainer(ctx, id, 0)).To(Succeed())
		g.Expect(c.StopPodSandbox(ctx, sb)).To(Succeed())
	}
	g.Expect(rs.Containers[id].State).To(Equal(runtimeapi.ContainerState_CONTAINER_EXITED))
	g.Expect(rs.Sandboxes[sb].State).To(Equal(runtimeapi.PodSandboxState_SANDBOX_NOTREADY))

	g.Expect(c.RemoveContainer(ctx, id)).To(Succeed())
	g.Expect(c.RemovePodSandbox(ctx, sb)).To(Succeed())
	g.Expect(rs.Containers).To(BeEmpty())
	g.Expect(rs.Sandboxes).To(BeEmpty())

	// Gone: the runtime does not know the IDs any more, which counts as done.
	g.Expect(c.StopContainer(ctx, id, 0)).To(Succeed())
	g.Expect(c.RemoveContainer(ctx, id)).To(Succeed())
	_, err = c.ContainerStatus(ctx, id)
	g.Expect(err).To(HaveOccurred(), "a status read of a missing container is an error")
	g.Expect(c.StartContainer(ctx, id)).To(MatchError(ContainSubstring("not found")))
	notFound := func() error { return status.Error(codes.NotFound, "not found") }
	rs.InjectError("PodSandboxStatus", notFound())
	g.Expect(c.StopPodSandbox(ctx, sb)).To(Succeed())
	rs.InjectError("PodSandboxStatus", notFound())
	g.Expect(c.RemovePodSandbox(ctx, sb)).To(Succeed())
}

func TestStopThatRacesWithRemovalSucceeds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rs, _ := newTestClient(t)
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("web", nil), "")
	g.Expect(err).NotTo(HaveOccurred())
	id, err := c.CreateContainer(ctx, sb, containerConfig("app"), nil)
	g.Expect(err).NotTo(HaveOccurred())

	// The status check passes, then the object disappears before the stop.
	rs.InjectError("StopContainer", fmt.Errorf("runtime said: %w", status.Error(codes.NotFound, "gone")))
	g.Expect(c.StopContainer(ctx, id, 0)).To(Succeed())
	rs.InjectError("StopPodSandbox", status.Error(codes.NotFound, "gone"))
	g.Expect(c.StopPodSandbox(ctx, sb)).To(Succeed())
}

func TestOtherRuntimeErrorsAreWrappedAndKeepTheirStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rs, _ := newTestClient(t)
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("web", nil), "")
	g.Expect(err).NotTo(HaveOccurred())

	before := counterValue(t, "stop_podsandbox")
	rs.InjectError("StopPodSandbox", status.Error(codes.Unavailable, "runtime down"))
	err = c.StopPodSandbox(ctx, sb)
	g.Expect(err).To(MatchError(ContainSubstring("stopping sandbox " + sb)))
	g.Expect(status.Code(errors.Unwrap(err))).To(Equal(codes.Unavailable))
	g.Expect(IsNotFound(err)).To(BeFalse())
	g.Expect(counterValue(t, "stop_podsandbox")).To(Equal(before + 1))

	// A status call for an unknown ID is an error, not success.
	rs.InjectError("PodSandboxStatus", status.Error(codes.NotFound, "no such sandbox"))
	_, err = c.PodSandboxStatus(ctx, "nope")
	g.Expect(IsNotFound(err)).To(BeTrue())
}

func TestIsNotFound(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"nil":               {nil, false},
		"plain":             {errors.New("not found"), false},
		"grpc NotFound":     {status.Error(codes.NotFound, "x"), true},
		"wrapped NotFound":  {fmt.Errorf("doing: %w", status.Error(codes.NotFound, "x")), true},
		"grpc Unavailable":  {status.Error(codes.Unavailable, "x"), false},
		"wrapped ErrNotOwn": {fmt.Errorf("doing: %w", ErrNotOwned), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := IsNotFound(tc.err); got != tc.want {
				t.Errorf("IsNotFound(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestImages(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, _, is := newTestClient(t)
	spec := &runtimeapi.ImageSpec{Image: "busybox:1"}

	img, err := c.ImageStatus(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img).To(BeNil(), "an absent image is nil without error")

	auth := &runtimeapi.AuthConfig{Username: "u", Password: "p"}
	ref, err := c.PullImage(ctx, spec, auth, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref).To(Equal("busybox:1"))
	is.AssertImagePulledWithAuth(t, spec, auth, "pull must pass the credentials")

	img, err = c.ImageStatus(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img.Id).To(Equal("busybox:1"))
	images, err := c.ListImages(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(images).To(HaveLen(1))
}

func TestStatusAndVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rs, _ := newTestClient(t)
	rs.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: false, Reason: "NetworkPluginNotReady"},
	}}
	st, err := c.Status(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.GetConditions()).To(HaveLen(2))
	g.Expect(st.GetConditions()[1].GetReason()).To(Equal("NetworkPluginNotReady"))

	v, err := c.Version(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.RuntimeName).To(Equal(fake.FakeRuntimeName))
}

// deadlineRuntime records the deadline StopContainer was called with.
type deadlineRuntime struct {
	*fake.FakeRuntimeService
	stopDeadline time.Duration
}

func (d *deadlineRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	if dl, ok := ctx.Deadline(); ok {
		d.stopDeadline = time.Until(dl)
	}
	return d.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

func TestStopContainerGetsTheGracePeriodOnTopOfTheTimeout(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	rs := &deadlineRuntime{FakeRuntimeService: fake.NewFakeRuntimeService()}
	c, err := New(rs, fake.NewFakeImageService(), Options{NodeName: testNode, RuntimeRequestTimeout: time.Minute})
	g.Expect(err).NotTo(HaveOccurred())
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("web", nil), "")
	g.Expect(err).NotTo(HaveOccurred())
	id, err := c.CreateContainer(ctx, sb, containerConfig("app"), nil)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(c.StopContainer(ctx, id, 30)).To(Succeed())
	g.Expect(rs.stopDeadline).To(BeNumerically("~", 90*time.Second, 5*time.Second))
}

func TestNewValidatesAndRegistersMetricsOnce(t *testing.T) {
	g := NewWithT(t)
	_, err := New(fake.NewFakeRuntimeService(), fake.NewFakeImageService(), Options{})
	g.Expect(err).To(MatchError(ContainSubstring("node name")))
	for range 2 {
		_, err := New(fake.NewFakeRuntimeService(), fake.NewFakeImageService(), Options{NodeName: testNode})
		g.Expect(err).NotTo(HaveOccurred())
	}
}

func counterValue(t *testing.T, operation string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := metrics.RuntimeOperationsErrors.WithLabelValues(operation).Write(m); err != nil {
		t.Fatalf("reading counter: %v", err)
	}
	return m.GetCounter().GetValue()
}

// labelLooks counts the runtime calls that read an object's labels to
// check its ownership.
func labelLooks(calls []string) int {
	n := 0
	for _, c := range calls {
		if c == "PodSandboxStatus" || c == "ListContainers" {
			n++
		}
	}
	return n
}

func TestObjectsKnownToBeOursAreNotCheckedAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, rs, _ := newTestClient(t)
	sb, err := c.RunPodSandbox(ctx, sandboxConfig("web", nil), "")
	g.Expect(err).NotTo(HaveOccurred())
	rs.Lock()
	rs.Called = nil
	rs.Unlock()
	id, err := c.CreateContainer(ctx, sb, containerConfig("app"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.StartContainer(ctx, id)).To(Succeed())
	g.Expect(c.StopContainer(ctx, id, 0)).To(Succeed())
	g.Expect(c.StopPodSandbox(ctx, sb)).To(Succeed())
	g.Expect(c.RemoveContainer(ctx, id)).To(Succeed())
	g.Expect(c.RemovePodSandbox(ctx, sb)).To(Succeed())
	g.Expect(labelLooks(rs.GetCalls())).To(BeZero(), "calls: %v", rs.GetCalls())
	g.Expect(rs.Containers).To(BeEmpty())
	g.Expect(rs.Sandboxes).To(BeEmpty())
	g.Expect(c.owned.len()).To(BeZero(), "removed objects are forgotten")
}

func TestObjectsOfAnEarlierRunAreCheckedOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	earlier, rs, is := newTestClient(t)
	foreignObjects(rs)
	sb, err := earlier.RunPodSandbox(ctx, sandboxConfig("web", nil), "")
	g.Expect(err).NotTo(HaveOccurred())
	id, err := earlier.CreateContainer(ctx, sb, containerConfig("app"), nil)
	g.Expect(err).NotTo(HaveOccurred())

	// A new client (a restarted agent) knows none of them.
	c, err := New(rs, is, Options{NodeName: testNode})
	g.Expect(err).NotTo(HaveOccurred())
	rs.Lock()
	rs.Called = nil
	rs.Unlock()
	g.Expect(c.StartContainer(ctx, id)).To(Succeed())
	g.Expect(c.StopContainer(ctx, id, 0)).To(Succeed())
	g.Expect(c.StopPodSandbox(ctx, sb)).To(Succeed())
	g.Expect(c.StopPodSandbox(ctx, sb)).To(Succeed())
	g.Expect(labelLooks(rs.GetCalls())).To(Equal(2), "one look at each object: %v", rs.GetCalls())

	// Foreign objects are looked at every time and never touched.
	for range 2 {
		g.Expect(c.StopContainer(ctx, "other-node-c", 0)).To(MatchError(ErrNotOwned))
		g.Expect(c.RemovePodSandbox(ctx, "kubelet-sb")).To(MatchError(ErrNotOwned))
	}
	g.Expect(rs.Containers["other-node-c"].State).To(Equal(runtimeapi.ContainerState_CONTAINER_RUNNING))
	g.Expect(rs.Sandboxes).To(HaveKey("kubelet-sb"))

	// Removing the sandbox forgets the containers remembered in it.
	g.Expect(c.RemovePodSandbox(ctx, sb)).To(Succeed())
	g.Expect(c.owned.len()).To(BeZero())
}

func TestOwnedIDsForgetASandboxWithItsContainers(t *testing.T) {
	var o ownedIDs
	o.add("sb1", "")
	o.add("c1", "sb1")
	o.add("c2", "sb1")
	o.add("c3", "sb2") // a container whose sandbox was never checked
	o.add("sb2", "")
	o.add("c4", "")

	o.forget("c2")
	if o.has("c2") || !o.has("c1") {
		t.Fatalf("forgetting a container: c1 %v, c2 %v", o.has("c1"), o.has("c2"))
	}
	o.forget("sb1")
	for _, id := range []string{"sb1", "c1"} {
		if o.has(id) {
			t.Errorf("%s remembered after its sandbox was forgotten", id)
		}
	}
	// A sandbox never remembered itself still takes its containers along.
	o.forget("sb-unknown")
	o.add("c5", "sb-unknown")
	o.forget("sb-unknown")
	if o.has("c5") {
		t.Error("c5 remembered after its sandbox, itself never remembered, was forgotten")
	}
	for _, id := range []string{"sb2", "c3", "c4"} {
		if !o.has(id) {
			t.Errorf("%s forgotten with another sandbox", id)
		}
	}
	o.forget("sb2")
	o.forget("c4")
	if n := o.len(); n != 0 {
		t.Errorf("%d IDs or sandboxes left after forgetting all", n)
	}
}
