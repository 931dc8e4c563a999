package prepuller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodelet/nodelet/pkg/nodelet"
)

const nodeName = "node-a"

// fakeImages is a runtime's image store: pulls of the images in pullable
// succeed, others fail as containerd says "not found".
type fakeImages struct {
	mu       sync.Mutex
	present  map[string]bool
	pullable map[string]bool
	pulls    []string
	down     bool
}

func (f *fakeImages) ImageStatus(_ context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, fmt.Errorf("getting status of image %q: %w", image.GetImage(), status.Error(codes.Unavailable, "connection refused"))
	}
	if strings.HasPrefix(image.GetImage(), "rejected/") {
		return nil, fmt.Errorf("getting status of image %q: %w", image.GetImage(), status.Error(codes.InvalidArgument, "invalid reference"))
	}
	if !f.present[image.GetImage()] {
		return nil, nil
	}
	return &runtimeapi.Image{Id: "sha256:" + image.GetImage(), RepoTags: []string{image.GetImage()}}, nil
}

func (f *fakeImages) PullImage(_ context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if auth != nil {
		return "", errors.New("the pre-puller sent credentials")
	}
	f.pulls = append(f.pulls, image.GetImage())
	if !f.pullable[image.GetImage()] {
		// As nodelet's runtime client wraps the runtime's error.
		return "", fmt.Errorf("pulling image %q: %w", image.GetImage(),
			status.Errorf(codes.NotFound, "failed to pull and unpack image %q: not found", image.GetImage()))
	}
	f.present[image.GetImage()] = true
	return "sha256:" + image.GetImage(), nil
}

func (f *fakeImages) pulled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.pulls
	f.pulls = nil
	return out
}

// memoryStore is a checkpoint store that survives a reconciler, as the
// node's disk does a nodelet restart; it keeps JSON, as the real one does.
type memoryStore struct{ data map[string][]byte }

func (m *memoryStore) Save(key string, value any) error {
	b, err := json.Marshal(value)
	m.data[key] = b
	return err
}

func (m *memoryStore) Load(key string, out any) error {
	b, ok := m.data[key]
	if !ok {
		return fmt.Errorf("checkpoint %q: %w", key, nodelet.ErrCheckpointNotFound)
	}
	return json.Unmarshal(b, out)
}

type harness struct {
	t        *testing.T
	client   client.Client
	images   *fakeImages
	store    *memoryStore
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	r        *reconciler
}

func newHarness(t *testing.T) *harness {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		}},
	}
	h := &harness{
		t:      t,
		client: fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(node).WithStatusSubresource(node).Build(),
		images: &fakeImages{
			present:  map[string]bool{},
			pullable: map[string]bool{"reg.example/app:1": true, "reg.example/tool:latest": true},
		},
		store: &memoryStore{data: map[string][]byte{}},
		clock: clocktesting.NewFakeClock(t0),
	}
	h.restart()
	return h
}

// restart makes a new reconciler on the same store, as a nodelet restart
// does.
func (h *harness) restart() {
	h.recorder = record.NewFakeRecorder(100)
	h.r = &reconciler{
		client: h.client, images: h.images, store: h.store, recorder: h.recorder,
		clock: h.clock, nodeName: nodeName, opts: Options{Interval: time.Minute}.withDefaults(),
	}
}

func (h *harness) annotate(value *string) {
	h.t.Helper()
	node := h.node()
	if value == nil {
		delete(node.Annotations, Annotation)
	} else {
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[Annotation] = *value
	}
	if err := h.client.Update(context.Background(), node); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) node() *corev1.Node {
	h.t.Helper()
	node := &corev1.Node{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Name: nodeName}, node); err != nil {
		h.t.Fatal(err)
	}
	return node
}

func (h *harness) reconcile() (ctrl.Result, error) {
	return h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: nodeName}})
}

func (h *harness) mustReconcile() time.Duration {
	h.t.Helper()
	res, err := h.reconcile()
	if err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	return res.RequeueAfter
}

func (h *harness) condition() *corev1.NodeCondition {
	h.t.Helper()
	node := h.node()
	if FindCondition(node.Status.Conditions, corev1.NodeReady) == nil {
		h.t.Fatal("the Ready condition is gone")
	}
	return FindCondition(node.Status.Conditions, ConditionType)
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) wantCondition(want corev1.ConditionStatus, reason, message string) {
	h.t.Helper()
	c := h.condition()
	if c == nil {
		h.t.Fatalf("no %s condition, want %s/%s", ConditionType, want, reason)
	}
	if c.Status != want || c.Reason != reason || c.Message != message {
		h.t.Fatalf("condition %s/%s %q, want %s/%s %q", c.Status, c.Reason, c.Message, want, reason, message)
	}
}

func (h *harness) wantPulls(want ...string) {
	h.t.Helper()
	if got := h.images.pulled(); strings.Join(got, ",") != strings.Join(want, ",") {
		h.t.Fatalf("pulled %v, want %v", got, want)
	}
}

func ptrTo(s string) *string { return &s }

func TestReconcile(t *testing.T) {
	h := newHarness(t)

	// Nothing named: nothing pulled, no condition, no requeue.
	if wait := h.mustReconcile(); wait != 0 {
		t.Fatalf("requeue after %s without the annotation", wait)
	}
	h.wantPulls()
	if c := h.condition(); c != nil {
		t.Fatalf("condition %+v without the annotation", c)
	}

	// One good image, one missing, one invalid entry.
	h.annotate(ptrTo(" reg.example/app:1, reg.example/missing:1 ,Not An Image"))
	wait := h.mustReconcile()
	h.wantPulls("reg.example/app:1", "reg.example/missing:1")
	h.wantCondition(corev1.ConditionFalse, ReasonPullFailed, "Failed to pull 1 of 3 images: reg.example/missing:1; invalid image reference: Not An Image")
	if wait != InitialBackoff {
		t.Fatalf("requeue after %s, want the back-off %s", wait, InitialBackoff)
	}
	events := strings.Join(h.events(), "\n")
	for _, want := range []string{
		`Normal Pulling Pulling image "reg.example/app:1"`,
		`Normal Pulled Successfully pulled image "reg.example/app:1" in `,
		`Warning Failed Failed to pull image "reg.example/missing:1": rpc error: code = NotFound desc = failed to pull and unpack image "reg.example/missing:1": not found`,
		`Warning InspectFailed Failed to apply default image tag "Not An Image"`,
	} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q in:\n%s", want, events)
		}
	}
	if strings.Contains(events, `pulling image "reg.example/missing:1": rpc error`) {
		t.Errorf("the Failed event repeats the client's wrapping:\n%s", events)
	}

	// Within the back-off the missing image is not tried again, and the
	// invalid entry is not reported again.
	h.clock.Step(4 * time.Second)
	if wait := h.mustReconcile(); wait != 6*time.Second {
		t.Fatalf("requeue after %s, want the rest of the back-off", wait)
	}
	h.wantPulls()
	if ev := h.events(); len(ev) != 0 {
		t.Fatalf("events within the back-off: %v", ev)
	}

	// A restart keeps the back-off: the checkpoint holds it.
	h.restart()
	h.mustReconcile()
	h.wantPulls()

	// After it, one more try, and the back-off doubles.
	h.clock.Step(6 * time.Second)
	if wait := h.mustReconcile(); wait != 2*InitialBackoff {
		t.Fatalf("requeue after %s, want the doubled back-off", wait)
	}
	h.wantPulls("reg.example/missing:1")
	var st State
	if err := h.store.Load(stateKey, &st); err != nil || st.Failures["reg.example/missing:1"].Count != 2 {
		t.Fatalf("checkpoint %+v (%v), want two failures of the missing image", st, err)
	}

	// The image becomes pullable, but the back-off still holds it.
	h.images.pullable["reg.example/missing:1"] = true
	h.clock.Step(19 * time.Second)
	h.mustReconcile()
	h.wantPulls()
	h.clock.Step(time.Second)
	h.mustReconcile()
	h.wantPulls("reg.example/missing:1")
	h.wantCondition(corev1.ConditionFalse, ReasonInvalidImageName, "1 of 3 image references is invalid: Not An Image")
	st = State{}
	if err := h.store.Load(stateKey, &st); err != nil || len(st.Failures) != 0 {
		t.Fatalf("checkpoint %+v (%v) after the pull succeeded, want no failures", st, err)
	}

	// Only good images, one without a tag: pulled as :latest.
	h.annotate(ptrTo("reg.example/app:1,reg.example/tool"))
	if wait := h.mustReconcile(); wait != time.Minute {
		t.Fatalf("requeue after %s, want the interval", wait)
	}
	h.wantPulls("reg.example/tool:latest")
	h.wantCondition(corev1.ConditionTrue, ReasonAllImagesPresent, "All 2 images are present")
	transition := h.condition().LastTransitionTime

	// An image removed meanwhile is pulled again at the next look; the
	// condition did not change, so it is not rewritten.
	delete(h.images.present, "reg.example/app:1")
	h.clock.Step(time.Minute)
	h.mustReconcile()
	h.wantPulls("reg.example/app:1")
	if c := h.condition(); !c.LastTransitionTime.Equal(&transition) || !c.LastHeartbeatTime.Equal(&transition) {
		t.Fatalf("condition rewritten without a change: %+v", c)
	}

	// A runtime that does not answer fails the round; nothing is pulled
	// and the condition stays.
	h.images.down = true
	delete(h.images.present, "reg.example/app:1")
	if _, err := h.reconcile(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("reconcile with the runtime down: %v, want its error", err)
	}
	h.wantPulls()
	h.wantCondition(corev1.ConditionTrue, ReasonAllImagesPresent, "All 2 images are present")
	h.images.down = false

	// The annotation removed: the condition goes, nothing is pulled.
	h.annotate(nil)
	if wait := h.mustReconcile(); wait != 0 {
		t.Fatalf("requeue after %s without the annotation", wait)
	}
	h.wantPulls()
	if c := h.condition(); c != nil {
		t.Fatalf("condition %+v after the annotation went", c)
	}
}

func TestReconcileReportsAnImageTheRuntimeRejects(t *testing.T) {
	h := newHarness(t)
	h.annotate(ptrTo("rejected/x:1, reg.example/app:1"))
	h.mustReconcile()
	h.wantPulls("reg.example/app:1")
	h.wantCondition(corev1.ConditionFalse, ReasonInvalidImageName,
		"1 of 2 image references is invalid: rejected/x:1")
	events := strings.Join(h.events(), "\n")
	if !strings.Contains(events, `Warning InspectFailed Failed to apply default image tag "rejected/x:1": rpc error: code = InvalidArgument desc = invalid reference`) {
		t.Fatalf("no InspectFailed event for the rejected image in:\n%s", events)
	}
}

func TestReconcileIgnoresOtherNodes(t *testing.T) {
	h := newHarness(t)
	h.annotate(ptrTo("reg.example/app:1"))
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "node-b"}})
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("reconcile of another node: %+v, %v", res, err)
	}
	h.wantPulls()
}

func TestRuntimeMessage(t *testing.T) {
	st := status.Error(codes.NotFound, "no such image")
	if got := runtimeMessage(fmt.Errorf("pulling image %q: %w", "x", st)); got != "rpc error: code = NotFound desc = no such image" {
		t.Errorf("wrapped gRPC error: %q", got)
	}
	if got := runtimeMessage(context.DeadlineExceeded); got != "context deadline exceeded" {
		t.Errorf("plain error: %q", got)
	}
}
