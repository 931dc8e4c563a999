package images

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fake "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/cri"

	"github.com/nodelet/nodelet/internal/credentialprovider"
)

func testPod(uid string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-" + uid, UID: types.UID(uid)},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestPullPolicyMatrix(t *testing.T) {
	const digest = "busybox@sha256:" + sixtyFour
	for _, tc := range []struct {
		name    string
		image   string
		policy  corev1.PullPolicy
		present bool
		pulled  bool
		reason  string
		events  []string
	}{
		{name: "Always present", image: "busybox:1", policy: corev1.PullAlways, present: true, pulled: true,
			events: []string{`Normal Pulling Pulling image "busybox:1"`, `Normal Pulled Successfully pulled image "busybox:1" in 0s (0s including waiting). Image size: 4242 bytes.`}},
		{name: "Always absent", image: "busybox:1", policy: corev1.PullAlways, pulled: true},
		{name: "IfNotPresent present", image: "busybox:1", policy: corev1.PullIfNotPresent, present: true,
			events: []string{`Normal Pulled Container image "busybox:1" already present on machine`}},
		{name: "IfNotPresent absent", image: "busybox:1", policy: corev1.PullIfNotPresent, pulled: true},
		{name: "Never present", image: "busybox:1", policy: corev1.PullNever, present: true,
			events: []string{`Normal Pulled Container image "busybox:1" already present on machine`}},
		{name: "Never absent", image: "busybox:1", policy: corev1.PullNever, reason: "ErrImageNeverPull",
			events: []string{`Warning ErrImageNeverPull Container image "busybox:1" is not present with pull policy of Never`}},
		{name: "default for no tag is Always", image: "busybox", present: true, pulled: true},
		{name: "default for latest is Always", image: "busybox:latest", present: true, pulled: true},
		{name: "default for a tag is IfNotPresent", image: "busybox:1", present: true},
		{name: "default for a digest is IfNotPresent", image: digest, present: true},
		{name: "default for a tag is IfNotPresent, absent", image: "busybox:1", pulled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			is := fake.NewFakeImageService()
			is.SetFakeImageSize(4242)
			tagged, err := applyDefaultTag(tc.image)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.present {
				is.SetFakeImages([]string{tagged})
			}
			rt, err := cri.New(fake.NewFakeRuntimeService(), is, cri.Options{NodeName: "node-a"})
			g.Expect(err).NotTo(HaveOccurred())
			rec := record.NewFakeRecorder(10)
			m := NewManager(rt, rec, Options{Clock: testingclock.NewFakeClock(time.Now())})
			c := corev1.Container{Name: "app", Image: tc.image, ImagePullPolicy: tc.policy}

			ref, img, err := m.EnsureImage(context.Background(), testPod("u1", c), &c, nil, nil)

			reason, _ := Reason(err)
			g.Expect(reason).To(Equal(tc.reason))
			if tc.reason == "" {
				g.Expect(ref).To(Equal(tagged))
			}
			// The status read to decide comes back when nothing was pulled.
			g.Expect(img != nil).To(Equal(tc.reason == "" && !tc.pulled))
			if img != nil {
				g.Expect(img.GetId()).To(Equal(ref))
			}
			g.Expect(slices.Contains(is.Called, "PullImage")).To(Equal(tc.pulled))
			if tc.events != nil {
				g.Expect(drainEvents(rec)).To(Equal(tc.events))
			}
		})
	}
}

func TestInvalidImageName(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	rec := record.NewFakeRecorder(10)
	m := NewManager(fi, rec, Options{})
	c := corev1.Container{Name: "app", Image: "Not/A Valid:Image"}

	_, _, err := m.EnsureImage(context.Background(), testPod("u1", c), &c, nil, nil)
	g.Expect(err).To(MatchError(ErrInvalidImageName))
	reason, msg := Reason(err)
	g.Expect(reason).To(Equal("InvalidImageName"))
	g.Expect(msg).To(HavePrefix(`Failed to apply default image tag "Not/A Valid:Image": couldn't parse image name "Not/A Valid:Image": `))
	g.Expect(drainEvents(rec)).To(ConsistOf(HavePrefix("Warning InspectFailed Failed to apply default image tag")))
	g.Expect(fi.pullCount()).To(BeZero())
}

func TestImageStatusFailureIsAnInspectError(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fi.statusErr = status.Error(codes.Unavailable, "runtime down")
	m := NewManager(fi, nil, Options{})
	c := corev1.Container{Name: "app", Image: "busybox:1"}
	_, _, err := m.EnsureImage(context.Background(), testPod("u1", c), &c, nil, nil)
	g.Expect(err).To(MatchError(ErrImageInspect))
	var grpcErr interface{ GRPCStatus() *status.Status }
	g.Expect(errors.As(err, &grpcErr)).To(BeTrue(), "the runtime error stays reachable")
	g.Expect(grpcErr.GRPCStatus().Code()).To(Equal(codes.Unavailable))
}

func TestPulledEventReportsDurationAndSize(t *testing.T) {
	g := NewWithT(t)
	clk := testingclock.NewFakeClock(time.Now())
	fi := newFakeImages()
	fi.onPull = func() { clk.Step(1234 * time.Millisecond) }
	fi.size = 5678
	rec := record.NewFakeRecorder(10)
	m := NewManager(fi, rec, Options{Clock: clk})
	c := corev1.Container{Name: "init", Image: "busybox:1"}
	pod := testPod("u1")
	pod.Spec.InitContainers = []corev1.Container{c}

	ref, _, err := m.EnsureImage(context.Background(), pod, &c, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref).To(Equal("sha256:busybox:1"))
	g.Expect(drainEvents(rec)).To(ContainElement(
		`Normal Pulled Successfully pulled image "busybox:1" in 1.234s (1.234s including waiting). Image size: 5678 bytes.`))
}

func TestEventsAreRecordedOnTheContainerOfThePod(t *testing.T) {
	g := NewWithT(t)
	rec := &objectRecorder{}
	m := NewManager(newFakeImages(), rec, Options{})
	c := corev1.Container{Name: "init", Image: "busybox:1"}
	pod := testPod("u1")
	pod.Spec.InitContainers = []corev1.Container{c}
	_, _, err := m.EnsureImage(context.Background(), pod, &c, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.refs).NotTo(BeEmpty())
	for _, ref := range rec.refs {
		g.Expect(*ref).To(Equal(corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "pod-u1",
			UID: "u1", FieldPath: "spec.initContainers{init}"}))
	}
}

func TestPullTriesEachMatchingCredentialThenAnonymous(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	m := NewManager(fi, nil, Options{})
	secrets := []*corev1.Secret{
		configJSONSecret("a", "registry.example.com/team"),
		configJSONSecret("b", "registry.example.com", "other.example.com"),
	}
	c := corev1.Container{Name: "app", Image: "registry.example.com/team/app:1"}
	ensure := func() error {
		_, _, err := m.EnsureImage(context.Background(), testPod("u1", c), &c, secrets, nil)
		return err
	}

	// The first matching credential works.
	g.Expect(ensure()).To(Succeed())
	g.Expect(fi.pullUsers()).To(Equal([]string{"registry.example.com/team"}))

	// Each is tried in turn.
	fi.reset()
	fi.failPull = func(_ string, a *runtimeapi.AuthConfig) error {
		if a.GetUsername() != "registry.example.com" {
			return status.Error(codes.Unauthenticated, "denied")
		}
		return nil
	}
	c.ImagePullPolicy = corev1.PullAlways
	g.Expect(ensure()).To(Succeed())
	g.Expect(fi.pullUsers()).To(Equal([]string{"registry.example.com/team", "registry.example.com"}))

	// Then anonymously; every attempt's error is reported.
	fi.reset()
	fi.failPull = func(_ string, a *runtimeapi.AuthConfig) error {
		if a != nil {
			return fmt.Errorf("denied for %s", a.Username)
		}
		return errors.New("anonymous pull denied")
	}
	m = NewManager(fi, nil, Options{})
	err := ensure()
	g.Expect(fi.pullUsers()).To(Equal([]string{"registry.example.com/team", "registry.example.com", ""}))
	_, msg := Reason(err)
	g.Expect(msg).To(Equal("denied for registry.example.com/team; denied for registry.example.com; anonymous pull denied"))
	g.Expect(msg).NotTo(ContainSubstring("pw-"))
}

func TestSerializedPullsRunOneAtATime(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fi.release = make(chan struct{})
	m := NewManager(fi, nil, Options{SerializeImagePulls: true})

	done := ensureConcurrently(m, "a:1", "b:1", "c:1")
	g.Eventually(fi.inFlightNow).Should(Equal(1))
	g.Consistently(fi.inFlightNow, 100*time.Millisecond).Should(Equal(1))
	close(fi.release)
	for range 3 {
		g.Eventually(done).Should(Receive(BeNil()))
	}
	g.Expect(fi.maxInFlight).To(Equal(1))
	g.Expect(fi.pullCount()).To(Equal(3))
}

func TestParallelPullsOverlapButNeverForTheSameImage(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fi.release = make(chan struct{})
	m := NewManager(fi, nil, Options{})

	done := ensureConcurrently(m, "a:1", "b:1", "c:1")
	g.Eventually(fi.inFlightNow).Should(Equal(3))
	close(fi.release)
	for range 3 {
		g.Eventually(done).Should(Receive(BeNil()))
	}

	// Three pods pulling one image share one pull.
	fi.reset()
	fi.release = make(chan struct{})
	done = ensureConcurrently(m, "d:1", "d:1", "d:1")
	g.Eventually(fi.statusCount).Should(Equal(3))
	g.Consistently(fi.pullCount, 100*time.Millisecond).Should(Equal(1))
	close(fi.release)
	for range 3 {
		g.Eventually(done).Should(Receive(BeNil()))
	}
	g.Expect(fi.pullCount()).To(Equal(1))
}

func TestPullsOfOneImageWithDifferentCredentialsWaitForEachOther(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fi.release = make(chan struct{})
	m := NewManager(fi, nil, Options{})
	done := make(chan error, 2)
	for i, secret := range []string{"s1", "s2"} {
		go func() {
			c := corev1.Container{Name: "app", Image: "registry.example.com/app:1"}
			s := configJSONSecret(secret, "registry.example.com")
			s.Data[corev1.DockerConfigJsonKey] = []byte(fmt.Sprintf(`{"auths":{"registry.example.com":{"username":"u%d","password":"p"}}}`, i))
			_, _, err := m.EnsureImage(context.Background(), testPod(secret, c), &c, []*corev1.Secret{s}, nil)
			done <- err
		}()
	}
	g.Eventually(fi.inFlightNow).Should(Equal(1))
	g.Consistently(fi.inFlightNow, 100*time.Millisecond).Should(Equal(1))
	close(fi.release)
	g.Eventually(done).Should(Receive(BeNil()))
	g.Eventually(done).Should(Receive(BeNil()))
	g.Expect(fi.maxInFlight).To(Equal(1))
}

func TestCallerThatGivesUpIsNotBackedOff(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fi.release = make(chan struct{})
	rec := record.NewFakeRecorder(10)
	m := NewManager(fi, rec, Options{})
	c := corev1.Container{Name: "app", Image: "busybox:1"}
	pod := testPod("u1", c)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, _, err := m.EnsureImage(ctx, pod, &c, nil, nil); done <- err }()
	g.Eventually(fi.inFlightNow).Should(Equal(1))
	cancel()
	g.Eventually(done).Should(Receive(MatchError(context.Canceled)))
	close(fi.release)

	// The pull went on; the next call finds the image without back-off.
	g.Eventually(fi.inFlightNow).Should(BeZero())
	_, _, err := m.EnsureImage(context.Background(), pod, &c, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(drainEvents(rec)).NotTo(ContainElement(HavePrefix("Warning Failed")))
}

func TestReason(t *testing.T) {
	for name, tc := range map[string]struct {
		err                 error
		reason, wantMessage string
	}{
		"nil":        {nil, "", ""},
		"wrapped":    {fmt.Errorf("ensuring: %w", &imageError{reason: ErrImageNeverPull, message: "m"}), "ErrImageNeverPull", "m"},
		"sentinel":   {fmt.Errorf("x: %w", ErrInvalidImageName), "InvalidImageName", "x: InvalidImageName"},
		"unexpected": {errors.New("boom"), "ErrImagePull", "boom"},
	} {
		t.Run(name, func(t *testing.T) {
			reason, msg := Reason(tc.err)
			if reason != tc.reason || msg != tc.wantMessage {
				t.Errorf("Reason(%v) = %q, %q; want %q, %q", tc.err, reason, msg, tc.reason, tc.wantMessage)
			}
		})
	}
}

// ensureConcurrently ensures each image for a pod of its own, concurrently.
func ensureConcurrently(m *Manager, images ...string) <-chan error {
	done := make(chan error, len(images))
	for i, image := range images {
		go func() {
			c := corev1.Container{Name: "app", Image: image, ImagePullPolicy: corev1.PullIfNotPresent}
			_, _, err := m.EnsureImage(context.Background(), testPod(fmt.Sprint("u", i), c), &c, nil, nil)
			done <- err
		}()
	}
	return done
}

// fakeImages is an ImageService that records pulls and their overlap.
type fakeImages struct {
	mu          sync.Mutex
	present     map[string]bool
	pulls       []*runtimeapi.AuthConfig
	statuses    int
	inFlight    int
	maxInFlight int
	size        uint64
	statusErr   error
	failPull    func(image string, auth *runtimeapi.AuthConfig) error
	onPull      func()
	release     chan struct{} // when set, pulls wait for it to close
}

func newFakeImages() *fakeImages { return &fakeImages{present: map[string]bool{}} }

func (f *fakeImages) PullImage(_ context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	f.pulls = append(f.pulls, auth)
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	release, fail, onPull := f.release, f.failPull, f.onPull
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight--; f.mu.Unlock() }()

	if release != nil {
		<-release
	}
	if onPull != nil {
		onPull()
	}
	if fail != nil {
		if err := fail(image.Image, auth); err != nil {
			return "", fmt.Errorf("pulling image %q: %w", image.Image, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.present[image.Image] = true
	return "sha256:" + image.Image, nil
}

func (f *fakeImages) ImageStatus(_ context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses++
	if f.statusErr != nil {
		return nil, fmt.Errorf("getting status of image %q: %w", image.Image, f.statusErr)
	}
	if !f.present[image.Image] {
		return nil, nil
	}
	return &runtimeapi.Image{Id: "sha256:" + image.Image, Size: f.size}, nil
}

func (f *fakeImages) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.present, f.pulls, f.statuses, f.maxInFlight = map[string]bool{}, nil, 0, 0
}

func (f *fakeImages) pullCount() int   { f.mu.Lock(); defer f.mu.Unlock(); return len(f.pulls) }
func (f *fakeImages) statusCount() int { f.mu.Lock(); defer f.mu.Unlock(); return f.statuses }
func (f *fakeImages) inFlightNow() int { f.mu.Lock(); defer f.mu.Unlock(); return f.inFlight }

func (f *fakeImages) pullUsers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.pulls {
		out = append(out, a.GetUsername())
	}
	return out
}

// objectRecorder records the objects events are recorded on.
type objectRecorder struct{ refs []*corev1.ObjectReference }

func (r *objectRecorder) Event(object runtimeObject, _, _, _ string) {
	r.refs = append(r.refs, object.(*corev1.ObjectReference))
}

type runtimeObject = runtime.Object

func TestPullCancelledWhenItsLastWaiterLeaves(t *testing.T) {
	g := NewWithT(t)
	blocking := &blockingImages{fakeImages: newFakeImages(), started: make(chan struct{}, 1), release: make(chan struct{})}
	m := NewManager(blocking, nil, Options{SerializeImagePulls: true})
	hang := corev1.Container{Name: "app", Image: "registry.example.com/hangs:1", ImagePullPolicy: corev1.PullAlways}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, _, err := m.EnsureImage(ctx, testPod("u1", hang), &hang, nil, nil)
		errs <- err
	}()
	g.Eventually(blocking.started).Should(Receive())
	cancel()
	g.Eventually(errs).Should(Receive(MatchError(context.Canceled)))
	g.Eventually(blocking.cancelled.Load).Should(BeTrue(), "the runtime pull's context is cancelled")

	// The only pull slot is free again: another image pulls at once.
	other := corev1.Container{Name: "app", Image: "registry.example.com/other:1", ImagePullPolicy: corev1.PullAlways}
	_, _, err := m.EnsureImage(context.Background(), testPod("u2", other), &other, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	close(blocking.release)
}

// blockingImages holds a pull of an image whose name contains "hangs"
// until its context ends or release is closed.
type blockingImages struct {
	*fakeImages
	started   chan struct{}
	release   chan struct{}
	cancelled atomic.Bool
}

func (b *blockingImages) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	if strings.Contains(image.GetImage(), "hangs") {
		b.started <- struct{}{}
		select {
		case <-ctx.Done():
			b.cancelled.Store(true)
			return "", ctx.Err()
		case <-b.release:
		}
	}
	return b.fakeImages.PullImage(ctx, image, auth, sb)
}

func TestMaxParallelImagePullsBoundsPullsAtOnce(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fi.release = make(chan struct{})
	m := NewManager(fi, nil, Options{MaxParallelImagePulls: 2})

	done := ensureConcurrently(m, "a:1", "b:1", "c:1")
	g.Eventually(fi.inFlightNow).Should(Equal(2))
	g.Consistently(fi.inFlightNow, 100*time.Millisecond).Should(Equal(2))
	close(fi.release)
	for range 3 {
		g.Eventually(done).Should(Receive(BeNil()))
	}
	g.Expect(fi.pullCount()).To(Equal(3))
}

func TestPullsBeyondTheQPSFailAsTheKubelets(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	rec := record.NewFakeRecorder(20)
	// One pull a minute with a burst of two: the third pull in a row is
	// refused without reaching the runtime.
	m := NewManager(fi, rec, Options{PullQPS: 1.0 / 60, PullBurst: 2})
	for i, image := range []string{"a:1", "b:1"} {
		c := corev1.Container{Name: "app", Image: image}
		_, _, err := m.EnsureImage(context.Background(), testPod(fmt.Sprint("u", i), c), &c, nil, nil)
		g.Expect(err).NotTo(HaveOccurred())
	}
	c := corev1.Container{Name: "app", Image: "c:1"}
	_, _, err := m.EnsureImage(context.Background(), testPod("u3", c), &c, nil, nil)
	g.Expect(err).To(MatchError(ErrPullQPSExceeded))
	reason, message := Reason(err)
	g.Expect(reason).To(Equal("ErrImagePull"))
	g.Expect(message).To(Equal("pull QPS exceeded"))
	g.Expect(fi.pullCount()).To(Equal(2), "the refused pull reached the runtime")
	g.Expect(drainEvents(rec)).To(ContainElement(`Warning Failed Failed to pull image "c:1": pull QPS exceeded`))
}

// fakeProviders stands in for the credential provider plugins.
type fakeProviders struct {
	images []string
	pods   []string
	creds  []credentialprovider.Credential
	err    error
}

func (f *fakeProviders) Credentials(_ context.Context, image string, pod *corev1.Pod) ([]credentialprovider.Credential, error) {
	f.images = append(f.images, image)
	f.pods = append(f.pods, string(pod.UID))
	return f.creds, f.err
}

func TestProviderCredentialsComeAfterThePullSecrets(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fi.failPull = func(_ string, a *runtimeapi.AuthConfig) error {
		if a.GetUsername() != "AWS" {
			return status.Error(codes.Unauthenticated, "denied")
		}
		return nil
	}
	fp := &fakeProviders{creds: []credentialprovider.Credential{{Provider: "ecr", Registry: "123.dkr.ecr.us-west-2.amazonaws.com", Username: "AWS", Password: "pw-token"}}}
	m := NewManager(fi, nil, Options{Providers: fp})
	secrets := []*corev1.Secret{configJSONSecret("a", "123.dkr.ecr.us-west-2.amazonaws.com")}
	c := corev1.Container{Name: "app", Image: "123.dkr.ecr.us-west-2.amazonaws.com/team/app:1"}
	_, _, err := m.EnsureImage(context.Background(), testPod("u1", c), &c, secrets, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.pullUsers()).To(Equal([]string{"123.dkr.ecr.us-west-2.amazonaws.com", "AWS"}))
	g.Expect(fp.images).To(Equal([]string{"123.dkr.ecr.us-west-2.amazonaws.com/team/app"}), "the plugin gets the repository without the tag")
	g.Expect(fp.pods).To(Equal([]string{"u1"}))
}

func TestAFailingProviderLeavesThePullToTheOthers(t *testing.T) {
	g := NewWithT(t)
	fi := newFakeImages()
	fp := &fakeProviders{err: errors.New("provider ecr: exit status 1")}
	m := NewManager(fi, nil, Options{Providers: fp})
	c := corev1.Container{Name: "app", Image: "nginx:1.27"}
	_, _, err := m.EnsureImage(context.Background(), testPod("u1", c), &c, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.pullUsers()).To(Equal([]string{""}), "an anonymous pull after the provider failed")
	g.Expect(fp.images).To(Equal([]string{"docker.io/library/nginx"}), "Docker Hub is named as the kubelet names it to plugins")
}
