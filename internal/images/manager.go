package images

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/credentialprovider"
)

// The event reasons the Manager records, as the kubelet's.
const (
	EventPulling       = "Pulling"
	EventPulled        = "Pulled"
	EventFailed        = "Failed"
	EventNeverPull     = "ErrImageNeverPull"
	EventInspectFailed = "InspectFailed"
)

// ImageService is what the Manager needs of the runtime; cri.Runtime
// implements it.
type ImageService interface {
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error)
}

// Recorder receives the Manager's events; record.EventRecorder implements
// it, and EventsRecorder adapts the events.k8s.io recorder controller-runtime
// managers hand out.
type Recorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// Options configure a Manager.
type Options struct {
	// SerializeImagePulls pulls one image at a time.
	SerializeImagePulls bool
	// MaxParallelImagePulls bounds concurrent pulls when they are not
	// serialized; zero means no bound.
	MaxParallelImagePulls int
	// PullQPS bounds pulls per second, with bursts of PullBurst: a pull
	// beyond them fails at once with ErrPullQPSExceeded, as the kubelet's
	// registryPullQPS and registryBurst. Zero: no bound.
	PullQPS   float32
	PullBurst int
	// Providers are the image credential provider plugins, whose
	// credentials are tried after the pull secrets'; nil: none.
	Providers CredentialProviders
	// Records are the image pull records that decide whether a pod may
	// use an image another pod pulled (the kubelet's
	// KubeletEnsureSecretPulledImages); nil: every pod may use every
	// image present.
	Records *PullRecords
	// Clock times pulls; nil means the real clock.
	Clock clock.Clock
}

// CredentialProviders gives an image's credentials from the kubelet's
// image credential provider plugins (credentialprovider.Providers).
type CredentialProviders interface {
	Credentials(ctx context.Context, image string, pod *corev1.Pod) ([]credentialprovider.Credential, error)
}

// Manager makes sure images are present before containers are created. It
// is safe for concurrent use. It keeps no back-off: when to pull again after
// a failure is part of the pod's plan (the image pull back-off of
// internal/kuberuntime/plan, kept in the pod's checkpoint).
type Manager struct {
	images    ImageService
	recorder  Recorder
	clock     clock.Clock
	puller    *puller
	providers CredentialProviders
	records   *PullRecords
}

// NewManager returns a Manager pulling through images and recording events
// on recorder (nil records none).
func NewManager(images ImageService, recorder Recorder, opts Options) *Manager {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	slots := opts.MaxParallelImagePulls
	if opts.SerializeImagePulls {
		slots = 1
	}
	return &Manager{
		images:    images,
		recorder:  recorder,
		clock:     opts.Clock,
		puller:    newPuller(images, opts.Clock, slots, pullLimiter(opts.PullQPS, opts.PullBurst)),
		providers: opts.Providers,
		records:   opts.Records,
	}
}

// EnsureImage makes the image of container, a container of pod, present
// according to its pull policy and returns the image reference to create
// the container with and, when it found the image present and pulled
// nothing, the image's status as the runtime reported it (nil after a
// pull). pullSecrets are the pod's image pull secrets, in the pod's order;
// sandboxConfig is the pod's sandbox config, passed to the runtime with the
// pull. Errors wrap one of the Err* reasons (see Reason); the matching
// events are already recorded.
func (m *Manager) EnsureImage(ctx context.Context, pod *corev1.Pod, container *corev1.Container, pullSecrets []*corev1.Secret, sandboxConfig *runtimeapi.PodSandboxConfig) (string, *runtimeapi.Image, error) {
	return m.ensure(ctx, pod, container.Image, pullPolicy(container.ImagePullPolicy, container.Image), pullSecrets, sandboxConfig, m.eventsFor(pod, container))
}

// EnsureVolumeImage makes the image of an image volume present according
// to the volume's pull policy (defaulted as the API server defaults it)
// for container, a container of pod that mounts the volume, and returns
// the image reference to mount. It pulls with the pod's pull secrets and
// records its events on the container, as EnsureImage does.
func (m *Manager) EnsureVolumeImage(ctx context.Context, pod *corev1.Pod, container *corev1.Container, vol *corev1.ImageVolumeSource, pullSecrets []*corev1.Secret, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ref, _, err := m.ensure(ctx, pod, vol.Reference, pullPolicy(vol.PullPolicy, vol.Reference), pullSecrets, sandboxConfig, m.eventsFor(pod, container))
	return ref, err
}

func (m *Manager) ensure(ctx context.Context, pod *corev1.Pod, image string, policy corev1.PullPolicy, pullSecrets []*corev1.Secret, sandboxConfig *runtimeapi.PodSandboxConfig, ev eventFunc) (string, *runtimeapi.Image, error) {
	tagged, err := applyDefaultTag(image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", image, err)
		ev(corev1.EventTypeWarning, EventInspectFailed, msg)
		return "", nil, &imageError{reason: ErrInvalidImageName, message: msg, cause: err}
	}
	spec := &runtimeapi.ImageSpec{Image: tagged, UserSpecifiedImage: image}

	present, err := m.images.ImageStatus(ctx, spec)
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
		ev(corev1.EventTypeWarning, EventInspectFailed, msg)
		return "", nil, &imageError{reason: ErrImageInspect, message: msg, cause: err}
	}
	notPresentNever := func() (string, *runtimeapi.Image, error) {
		// Also when the image is present but the pod may not use it:
		// the answer must not tell the two apart.
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		ev(corev1.EventTypeWarning, EventNeverPull, msg)
		return "", nil, &imageError{reason: ErrImageNeverPull, message: msg}
	}
	creds := sync.OnceValue(func() []Credential {
		c := m.credentials(ctx, tagged, pullSecrets)
		return append(c, m.providerCredentials(ctx, tagged, pod)...)
	})
	if !shouldPull(policy, present != nil) {
		if present == nil {
			return notPresentNever()
		}
		id := present.GetId()
		if m.records == nil {
			ev(corev1.EventTypeNormal, EventPulled, fmt.Sprintf("Container image %q already present on machine", image))
			return id, present, nil
		}
		if !m.records.MustPull(image, id, func() PodCredentials { return podCredentials(creds()) }) {
			ev(corev1.EventTypeNormal, EventPulled, fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", image))
			return id, present, nil
		}
		if policy == corev1.PullNever {
			return notPresentNever()
		}
	}
	ref, err := m.pull(ctx, spec, creds(), sandboxConfig, ev)
	return ref, nil, err
}

// podCredentials are the origins of a pod's credentials for an image, as
// the pull records compare them: its pull secrets, and the first service
// account a credential provider took a token of.
func podCredentials(creds []Credential) PodCredentials {
	var out PodCredentials
	for _, c := range creds {
		switch {
		case c.secret != nil:
			out.Secrets = append(out.Secrets, *c.secret)
		case c.serviceAccount != nil && out.ServiceAccount == nil:
			out.ServiceAccount = c.serviceAccount
		}
	}
	return out
}

// pull pulls spec with creds, recording the outcome in events and in the
// pull records.
func (m *Manager) pull(ctx context.Context, spec *runtimeapi.ImageSpec, creds []Credential, sandboxConfig *runtimeapi.PodSandboxConfig, ev eventFunc) (string, error) {
	image := spec.GetUserSpecifiedImage()
	if m.records != nil {
		if err := m.records.RecordIntent(image); err != nil {
			msg := fmt.Sprintf("Failed to record image pull intent for container image %q: %v", image, err)
			ev(corev1.EventTypeWarning, EventFailed, msg)
			return "", &imageError{reason: ErrImagePull, message: msg, cause: err}
		}
	}
	ev(corev1.EventTypeNormal, EventPulling, fmt.Sprintf("Pulling image %q", image))
	res, err := m.puller.pull(ctx, spec, creds, sandboxConfig)
	if m.records != nil {
		if err != nil {
			m.records.RecordFailed(image)
		} else {
			m.records.RecordPulled(image, res.ref, credentialsFor(res.used))
		}
	}
	if err != nil && ctx.Err() != nil {
		// The caller gave up waiting; that says nothing about the image.
		return "", fmt.Errorf("pulling image %q: %w", image, err)
	}
	if err != nil {
		ev(corev1.EventTypeWarning, EventFailed, fmt.Sprintf("Failed to pull image %q: %v", image, err))
		return "", &imageError{reason: ErrImagePull, message: pullMessage(err), cause: err}
	}
	ev(corev1.EventTypeNormal, EventPulled, fmt.Sprintf(
		"Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.",
		image, res.pulling.Truncate(time.Millisecond), res.total.Truncate(time.Millisecond), res.size))
	return res.ref, nil
}

// pullLimiter is the token bucket of qps and burst, or nil when qps is 0.
func pullLimiter(qps float32, burst int) flowcontrol.RateLimiter {
	if qps <= 0 {
		return nil
	}
	return flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))
}

// providerCredentials returns the credentials the image credential
// provider plugins give for image, after the pull secrets' as the
// kubelet's keyring orders them; a failing provider is logged and gives
// none.
func (m *Manager) providerCredentials(ctx context.Context, image string, pod *corev1.Pod) []Credential {
	if m.providers == nil {
		return nil
	}
	repo, err := providerImage(image)
	if err != nil {
		return nil
	}
	found, err := m.providers.Credentials(ctx, repo, pod)
	if err != nil {
		log.FromContext(ctx).Error(err, "Image credential provider failed; pulling without its credentials", "image", repo)
	}
	out := make([]Credential, 0, len(found))
	for _, c := range found {
		cred := Credential{
			Registry: c.Registry,
			Source:   "credential provider " + c.Provider,
			auth:     &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password},
		}
		if sa := c.ServiceAccount; sa != nil {
			cred.serviceAccount = &kubeletv1beta1.ImagePullServiceAccount{UID: string(sa.UID), Namespace: sa.Namespace, Name: sa.Name}
		}
		out = append(out, cred)
	}
	return out
}

// providerImage is the image as the kubelet names it to its credential
// provider plugins: the repository, without tag or digest, with Docker
// Hub as docker.io.
func providerImage(image string) (string, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", err
	}
	repo := ref.Context().Name()
	if rest, ok := strings.CutPrefix(repo, name.DefaultRegistry+"/"); ok {
		repo = dockerHubHost + "/" + rest
	}
	return repo, nil
}

// credentials returns the pull secrets' credentials for image; secrets that
// do not parse are logged by name and skipped.
func (m *Manager) credentials(ctx context.Context, image string, pullSecrets []*corev1.Secret) []Credential {
	keyring, err := NewKeyring(pullSecrets)
	if err != nil {
		log.FromContext(ctx).Error(err, "Skipping unreadable image pull secret entries", "image", image)
	}
	creds, err := keyring.Lookup(image)
	if err != nil {
		// The image parsed in applyDefaultTag; this cannot happen.
		return nil
	}
	return creds
}

// pullMessage is the Waiting message of a failed pull: the runtime's words,
// without the wrapping that names the image again.
func pullMessage(err error) string {
	var msgs []string
	for _, e := range attemptErrors(err) {
		if inner := errors.Unwrap(e); inner != nil {
			e = inner
		}
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "; ")
}

func attemptErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// pullPolicy returns policy, or the API server's default for image when it
// is empty: Always for the latest tag or no tag, IfNotPresent otherwise.
func pullPolicy(policy corev1.PullPolicy, image string) corev1.PullPolicy {
	if policy != "" {
		return policy
	}
	if tag, digest := tagAndDigest(image); digest == "" && (tag == "" || tag == "latest") {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func shouldPull(policy corev1.PullPolicy, present bool) bool {
	switch policy {
	case corev1.PullAlways:
		return true
	case corev1.PullNever:
		return false
	default:
		return !present
	}
}

// applyDefaultTag checks that image parses and returns it with ":latest"
// appended when it names neither a tag nor a digest.
func applyDefaultTag(image string) (string, error) {
	if _, err := name.ParseReference(image); err != nil || strings.TrimSpace(image) != image {
		if err == nil {
			err = errors.New("invalid reference format")
		}
		return "", fmt.Errorf("couldn't parse image name %q: %w", image, err)
	}
	if tag, digest := tagAndDigest(image); tag == "" && digest == "" {
		return image + ":latest", nil
	}
	return image, nil
}

// tagAndDigest splits the tag and digest off an image reference.
func tagAndDigest(image string) (tag, digest string) {
	rest, digest, _ := strings.Cut(image, "@")
	slash := strings.LastIndex(rest, "/")
	if colon := strings.LastIndex(rest, ":"); colon > slash {
		tag = rest[colon+1:]
	}
	return tag, digest
}

type eventFunc func(eventtype, reason, message string)

// eventsFor returns a function recording events on the container's
// reference within pod, the way kubectl describe shows them.
func (m *Manager) eventsFor(pod *corev1.Pod, container *corev1.Container) eventFunc {
	if m.recorder == nil {
		return func(string, string, string) {}
	}
	ref := &corev1.ObjectReference{
		Kind:            "Pod",
		APIVersion:      "v1",
		Namespace:       pod.Namespace,
		Name:            pod.Name,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
		FieldPath:       fieldPath(pod, container.Name),
	}
	return func(eventtype, reason, message string) {
		m.recorder.Event(ref, eventtype, reason, message)
	}
}

// fieldPath names a container within its pod's spec.
func fieldPath(pod *corev1.Pod, container string) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			return "spec.initContainers{" + container + "}"
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == container {
			return "spec.ephemeralContainers{" + container + "}"
		}
	}
	return "spec.containers{" + container + "}"
}
