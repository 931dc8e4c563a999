package executor

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeruntime "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// reportingRuntime is the fake runtime reporting handlers and features in
// its Status response, as containerd 2 and CRI-O do, and keeping the
// container configs it was given.
type reportingRuntime struct {
	*fakeruntime.FakeRuntimeService
	status *runtimeapi.StatusResponse

	mu      sync.Mutex
	configs []*runtimeapi.ContainerConfig
}

func (r *reportingRuntime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	if _, err := r.FakeRuntimeService.Status(ctx, verbose); err != nil {
		return nil, err
	}
	return r.status, nil
}

func (r *reportingRuntime) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.configs = append(r.configs, cfg)
	r.mu.Unlock()
	return r.FakeRuntimeService.CreateContainer(ctx, sandboxID, cfg, sbCfg)
}

type runtimeClasses map[string]string

func (rc runtimeClasses) RuntimeClass(_ context.Context, name string) (*nodev1.RuntimeClass, error) {
	h, ok := rc[name]
	if !ok {
		// As the manager's cache says it.
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, name)
	}
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: h}, nil
}

// mountOne is a VolumeManager giving every container one mount.
type mountOne struct{ noVolumes }

func (mountOne) Mounts(*v1.Pod, *v1.Container, int32, []criconfig.EnvVar, map[string]string) ([]*runtimeapi.Mount, error) {
	return []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/pods/uid-1/volumes/data"}}, nil
}

func TestIsolation(t *testing.T) {
	containerd16 := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}
	reporting := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{
			{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}},
			{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{}},
			{Name: "crun-userns", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}},
		},
	}
	classes := runtimeClasses{"sandboxed": "runc-e2e", "runc": "crun-userns", "userns": "crun-userns", "kata": "kata", "plain": "runc"}
	mapping := []*runtimeapi.IDMapping{{HostId: 65536, ContainerId: 0, Length: 65536}}
	for _, tc := range []struct {
		name        string
		status      *runtimeapi.StatusResponse
		class       string
		hostUsers   *bool
		noAllocator bool
		// wantHandler is the handler the sandbox runs in; wantEvent the
		// FailedCreatePodSandBox message when none is created.
		wantHandler string
		wantUserns  *runtimeapi.UserNamespace
		wantEvent   string
	}{
		{name: "no RuntimeClass: default handler", status: containerd16,
			wantUserns: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "RuntimeClass name is not the handler", status: containerd16, class: "sandboxed", wantHandler: "runc-e2e",
			wantUserns: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "class named like a handler runs on its own handler", status: reporting, class: "runc", wantHandler: "crun-userns",
			wantUserns: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "missing RuntimeClass", status: containerd16, class: "missing",
			wantEvent: `Failed to create pod sandbox: runtimeclass.node.k8s.io "missing" not found`},
		{name: "handler the runtime does not report", status: reporting, class: "kata",
			wantEvent: `Failed to create pod sandbox: RuntimeHandler "kata" not supported`},
		{name: "handlers not reported: any handler is tried", status: containerd16, class: "kata", wantHandler: "kata",
			wantUserns: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "hostUsers false on containerd 1.6", status: containerd16, hostUsers: ptr.To(false),
			wantEvent: "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{name: "hostUsers false, handler without userns", status: reporting, class: "plain", hostUsers: ptr.To(false),
			wantEvent: "Failed to create pod sandbox: can't set `spec.hostUsers: false`, RuntimeClass handler \"runc\" does not support user namespaces"},
		{name: "hostUsers true on containerd 1.6", status: containerd16, hostUsers: ptr.To(true),
			wantUserns: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}},
		{name: "hostUsers false, handler with userns", status: reporting, class: "userns", hostUsers: ptr.To(false), wantHandler: "crun-userns",
			wantUserns: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: mapping, Gids: mapping}},
		{name: "hostUsers false, no IDs configured", status: reporting, class: "userns", hostUsers: ptr.To(false), noAllocator: true,
			wantEvent: "Failed to create pod sandbox: can't set `spec.hostUsers: false`, RuntimeClass handler \"crun-userns\" does not support user namespaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			fake := &reportingRuntime{FakeRuntimeService: fakeruntime.NewFakeRuntimeService(), status: tc.status}
			rt, err := cri.New(fake, fakeruntime.NewFakeImageService(), cri.Options{NodeName: fakeNode})
			g.Expect(err).NotTo(HaveOccurred())
			e, _ := newFakeExecutor(t)
			recorder := record.NewFakeRecorder(100)
			e.Runtime, e.Recorder, e.Volumes = rt, recorder, mountOne{}
			e.RuntimeClasses, e.Features = classes, cri.NewFeatureCache(rt)
			if !tc.noAllocator {
				e.UserNamespaces, err = NewUserNamespaces(t.TempDir(), DefaultUserNamespaceFirstID, DefaultUserNamespaceLength)
				g.Expect(err).NotTo(HaveOccurred())
			}
			pod := fakePod("app")
			pod.Spec.HostUsers = tc.hostUsers
			if tc.class != "" {
				pod.Spec.RuntimeClassName = ptr.To(tc.class)
			}
			st := state.NewPodState(pod.UID)
			err = e.Start(ctx, pod, state.PodRuntime{}, &st, startPlan(pod), noSave)
			sandboxes, lerr := rt.ListPodSandboxes(ctx, nil)
			g.Expect(lerr).NotTo(HaveOccurred())

			if tc.wantEvent != "" {
				g.Expect(err).To(HaveOccurred())
				g.Expect(sandboxes).To(BeEmpty(), "no sandbox is created")
				g.Expect(recorder.Events).To(Receive(Equal("Warning FailedCreatePodSandBox " + tc.wantEvent)))
				g.Expect(st.SandboxFailure).NotTo(BeNil())
				g.Expect(st.SandboxFailure.Reason).To(Equal(state.ReasonFailedCreatePodSandBox))
				g.Expect(st.SandboxFailure.Message).To(Equal(tc.wantEvent))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sandboxes).To(HaveLen(1))
			g.Expect(sandboxes[0].RuntimeHandler).To(Equal(tc.wantHandler))
			status, err := rt.PodSandboxStatus(ctx, sandboxes[0].Id)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status.GetLinux().GetNamespaces().GetOptions().GetUsernsOptions()).To(BeComparableTo(tc.wantUserns, protoEqual()))
			g.Expect(fake.configs).To(HaveLen(1))
			c := fake.configs[0]
			g.Expect(c.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()).To(BeComparableTo(tc.wantUserns, protoEqual()))
			wantIDs := []*runtimeapi.IDMapping(nil)
			if tc.wantUserns.Mode == runtimeapi.NamespaceMode_POD {
				wantIDs = mapping
			}
			g.Expect(c.Mounts[0].UidMappings).To(BeComparableTo(wantIDs, protoEqual()))
			g.Expect(c.Mounts[0].GidMappings).To(BeComparableTo(wantIDs, protoEqual()))
		})
	}
}

func TestRemovePodReleasesUserNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, _ := newFakeExecutor(t)
	dir := t.TempDir()
	users, err := NewUserNamespaces(dir, DefaultUserNamespaceFirstID, DefaultUserNamespaceLength)
	g.Expect(err).NotTo(HaveOccurred())
	e.UserNamespaces = users
	ids, err := users.IDs("uid-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.RemovePod(ctx, fakePod("app"), state.PodRuntime{})).To(Succeed())
	// Freed: the next pod gets the same lowest range.
	again, err := users.IDs("uid-2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(ids))
	g.Expect(strings.HasSuffix(users.path("uid-2"), "uid-2.json")).To(BeTrue())
}

func protoEqual() cmp.Option { return protocmp.Transform() }
