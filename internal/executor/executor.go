package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/containerlogs"
	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/features"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Event reasons, as the kubelet emits them.
const (
	EventPulling                = "Pulling"
	EventPulled                 = "Pulled"
	EventFailed                 = "Failed"
	EventBackOff                = "BackOff"
	EventCreated                = "Created"
	EventStarted                = "Started"
	EventKilling                = "Killing"
	EventFailedCreatePodSandBox = "FailedCreatePodSandBox"
	EventFailedMount            = "FailedMount"
	// EventFailedPrepareDynamicResources: a pod's ResourceClaims could not
	// be prepared, so its sandbox is not made.
	EventFailedPrepareDynamicResources = "FailedPrepareDynamicResources"
	EventSandboxChanged                = "SandboxChanged"
)

// ImageManager makes a container's image present and returns its
// reference and, when it read it and pulled nothing, the image's status
// (nil otherwise: the executor then reads it for the image's user).
type ImageManager interface {
	EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, pullSecrets []*v1.Secret, sandboxCfg *runtimeapi.PodSandboxConfig) (string, *runtimeapi.Image, error)
	// EnsureVolumeImage makes the image of an image volume that c mounts
	// present, as EnsureImage does the container's, and returns the
	// reference the runtime mounts it by.
	EnsureVolumeImage(ctx context.Context, pod *v1.Pod, c *v1.Container, vol *v1.ImageVolumeSource, pullSecrets []*v1.Secret, sandboxCfg *runtimeapi.PodSandboxConfig) (string, error)
}

// ImageErrorReason maps an ImageManager error to a container waiting
// reason and message.
type ImageErrorReason func(err error) (reason, message string)

// VolumeManager prepares a pod's volumes on the host.
type VolumeManager interface {
	// SetUp prepares the pod's volumes once; for a pod whose volumes are
	// set up it reads and writes nothing.
	SetUp(ctx context.Context, pod *v1.Pod) error
	// Refresh rewrites what is due in a set-up pod's volumes (tokens,
	// downward API files after a metadata change).
	Refresh(ctx context.Context, pod *v1.Pod) error
	// Update rewrites the named volumes of a set-up pod from the objects
	// they project.
	Update(ctx context.Context, pod *v1.Pod, volumes []string) error
	WriteEtcHosts(pod *v1.Pod, podIPs []string) error
	// Mounts prepares and returns the container's mounts for one start;
	// env, the container's resolved environment, expands subPathExpr;
	// images are the references of the image volumes it mounts, by
	// volume name.
	Mounts(pod *v1.Pod, c *v1.Container, restartCount int32, env []criconfig.EnvVar, images map[string]string) ([]*runtimeapi.Mount, error)
	// Devices returns the block devices of the container's volumeDevices.
	Devices(pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Device, error)
	TerminationMessagePath(pod *v1.Pod, containerName string, restartCount int32) string
	TearDown(ctx context.Context, uid types.UID) error
	// NextRefresh is when the earliest service account token of the pod is
	// due for refresh, if it has one.
	NextRefresh(uid types.UID) (time.Time, bool)
	// OpenVolumeFile opens a file in an emptyDir volume of the pod (the
	// env file of a fileKeyRef), resolved inside the volume.
	OpenVolumeFile(pod *v1.Pod, volume, path string) (*os.File, error)
}

// ObjectReader reads the ConfigMaps and Secrets a pod names (the
// referenced-object store: no API request once it holds them).
type ObjectReader interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// SaveFunc persists the pod's state; it is called after every runtime mutation.
type SaveFunc func() error

// Executor runs plans against the container runtime. All fields but Clock
// are required.
type Executor struct {
	Runtime     cri.Runtime
	Images      ImageManager
	ImageReason ImageErrorReason
	Volumes     VolumeManager
	Objects     ObjectReader
	// ServiceEnv returns the service variables of the pod's containers
	// (KUBERNETES_SERVICE_HOST, ...); an error makes the start a
	// CreateContainerConfigError.
	ServiceEnv func(ctx context.Context, pod *v1.Pod) (map[string]string, error)
	Recorder   record.EventRecorder
	Clock      clock.Clock
	// Sandbox holds the node-wide sandbox options; Attempt is set per call.
	Sandbox criconfig.SandboxOptions
	// NodeName is the node the pods run on: the marker written into each
	// pod log directory made names it (containerlogs.PodDirMarker), so
	// that nodelet removes only the pod log directories it made.
	NodeName string
	// Node returns what container configs need of the node.
	Node func(ctx context.Context) (nodeinfo.Facts, error)
	// RuntimeClasses reads the RuntimeClass a pod names, for its runtime
	// handler; nil fails every pod that names one.
	RuntimeClasses RuntimeClassReader
	// Features are the runtime's handlers and features, read once and
	// refreshed (cri.FeatureCache); nil knows none: no handler is checked
	// and no pod gets a user namespace.
	Features cri.FeatureSource
	// UserNamespaces hands out the ID ranges of pods' user namespaces;
	// nil gives none, and pods asking for one are refused.
	UserNamespaces UserNamespaceAllocator
	// Cgroups makes, bounds and removes the pods' cgroups; nil makes none
	// and every sandbox gets Sandbox.CgroupParent.
	Cgroups PodCgroups
	// Claims prepares pods' ResourceClaims before their sandboxes are
	// made and gives their containers the claims' CDI devices
	// (dra.Manager); nil refuses to start a pod that uses claims.
	Claims ClaimPreparer
	// Devices adds to a container's config what the device plugins
	// allocated to it (deviceplugin.Manager); nil adds nothing.
	Devices ContainerDevices
	// Gate orders and bounds the runtime calls that start pods; nil lets
	// them all run at once.
	Gate *StartGate
	// Logs keeps the containers' log links and rotated log files; nil
	// keeps none.
	Logs ContainerLogs
	// Resources are the node's settings and facts the containers' cgroup
	// settings depend on (memory.oom.group, swap, MemoryQoS, huge pages):
	// see criconfig.ContainerResources.
	Resources criconfig.ResourceOptions

	// stopped holds the IDs of the sandboxes this process stopped (a
	// StopPodSandbox that succeeded) and has not removed yet.
	stopped sync.Map
	// firstLook answers each pod name's first Observe.
	firstLook firstLook
}

// PodCgroups manages one cgroup per pod, the parent of its sandbox
// (internal/cgroups.Manager).
type PodCgroups interface {
	// PodParent is the pod's cgroup as the runtime's driver names it.
	PodParent(pod *v1.Pod) string
	// EnsurePod makes the pod's cgroup, bounded by its resources, or
	// adopts the one that exists.
	EnsurePod(pod *v1.Pod) error
	// ResizePod brings the pod's cgroup to its resources around update,
	// which changes its containers'.
	ResizePod(pod *v1.Pod, update func() error) error
	// RemovePod kills what is left in the pod's cgroup and removes it.
	RemovePod(ctx context.Context, uid types.UID) error
}

// ClaimPreparer prepares a pod's ResourceClaims (Dynamic Resource
// Allocation) before its sandbox is made, and unprepares them once none of
// its containers runs. dra.Manager implements it.
type ClaimPreparer interface {
	// Prepare prepares the claims the pod uses; an error leaves the pod
	// unstarted.
	Prepare(ctx context.Context, pod *v1.Pod) error
	// Unprepare takes the pod off the claims it uses, unpreparing those
	// no other pod uses; idempotent.
	Unprepare(ctx context.Context, pod types.UID) error
	// CDIDevices returns the CDI device IDs of the claims the container
	// uses.
	CDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error)
}

// ContainerDevices gives a container the devices the device plugins
// allocated to it.
type ContainerDevices interface {
	// ContainerDevices runs the plugins' PreStartContainer where they ask
	// for it and adds their environment, mounts, device nodes,
	// annotations and CDI devices to cfg. A container without devices is
	// left as it is.
	ContainerDevices(ctx context.Context, pod *v1.Pod, container string, cfg *runtimeapi.ContainerConfig) error
	// ContainerEnv is the environment they give the container, which
	// $(VAR) in its command and args sees.
	ContainerEnv(pod *v1.Pod, container string) (map[string]string, error)
}

// RuntimeClassReader reads RuntimeClasses (node.k8s.io/v1) by name. A
// missing one is an error for which apierrors.IsNotFound holds.
type RuntimeClassReader interface {
	RuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error)
}

// UserNamespaceAllocator hands out the host ID ranges of pods' user
// namespaces; UserNamespaces implements it.
type UserNamespaceAllocator interface {
	// IDs returns the pod's range, the same one until Release.
	IDs(uid types.UID) (criconfig.IDRange, error)
	// Release frees the pod's range; a pod without one is no error.
	Release(uid types.UID) error
	// UIDs lists the pods that hold a range, for housekeeping to free
	// those of pods gone without their worker.
	UIDs() []types.UID
}

func (e *Executor) now() time.Time {
	if e.Clock == nil {
		return time.Now()
	}
	return e.Clock.Now()
}

// Start carries out the start step of a plan for pod (a.Starts): volumes,
// the sandbox, single-container kills and the container starts (ephemeral,
// init, then regular ones); a plan without one does nothing. A plan's
// KillPod must have been carried out with Terminate first. rt is the pod's
// observed runtime, st its state, updated in place. It returns the first
// error that should make the caller retry with back-off; container start
// failures are recorded in st (and shown in the status) rather than
// returned. Once ctx ends nothing more is created or started.
func (e *Executor) Start(ctx context.Context, pod *v1.Pod, rt state.PodRuntime, st *state.PodState, a plan.PodActions, save SaveFunc) error {
	if !a.Starts() {
		return nil
	}
	if err := e.Volumes.SetUp(ctx, pod); err != nil {
		e.Recorder.Event(pod, v1.EventTypeWarning, EventFailedMount, err.Error())
		if a.CreateSandbox {
			// Nothing runs yet: the status says why nothing starts.
			st.RecordMountFailure(err.Error(), e.now())
			if serr := save(); serr != nil {
				log.FromContext(ctx).Error(serr, "Unable to save pod state")
			}
		}
		return fmt.Errorf("setting up volumes: %w", err)
	}
	if a.CreateSandbox {
		if err := e.prepareClaims(ctx, pod); err != nil {
			return err
		}
	}
	// A running pod's sandbox config is built only for a container to
	// start in it: most syncs of a running pod start nothing.
	var sb *sandbox
	if a.CreateSandbox || len(a.EphemeralContainersToStart)+len(a.InitContainersToStart)+len(a.ContainersToStart) > 0 {
		var err error
		if sb, err = e.ensureSandbox(ctx, pod, rt, st, a, save); err != nil {
			return err
		}
	}
	for id, k := range a.ContainersToKill {
		if err := e.killContainer(ctx, pod, id, k.Name, k.Message, k.PreStop, k.GracePeriodSeconds); err != nil {
			return err
		}
	}
	for name, b := range a.BackingOff {
		switch b.Reason {
		case state.ReasonCrashLoopBackOff:
			e.Recorder.Eventf(pod, v1.EventTypeWarning, EventBackOff, "Back-off restarting failed container %s in pod %s", name, podspec.PodDesc(pod))
		case state.ReasonImagePullBackOff:
			e.Recorder.Eventf(pod, v1.EventTypeNormal, EventBackOff, "Back-off pulling image %q", b.Image)
		}
	}
	// Ephemeral containers first, as the kubelet starts them: a debugging
	// container must start even when an init container cannot.
	for _, s := range a.EphemeralContainersToStart {
		if err := e.startContainer(ctx, pod, sb, s, st, save); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	for _, s := range a.InitContainersToStart {
		if err := e.startContainer(ctx, pod, sb, s, st, save); err != nil {
			// The next init container must not start before this one.
			return ctx.Err()
		}
	}
	for _, s := range a.ContainersToStart {
		if err := e.startContainer(ctx, pod, sb, s, st, save); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// prepareClaims prepares the pod's ResourceClaims before its sandbox is
// made, as the kubelet does; a failure is the kubelet's
// FailedPrepareDynamicResources Event and an error to retry with back-off,
// and the pod does not start without them. Without a ClaimPreparer a pod
// that uses claims fails so.
func (e *Executor) prepareClaims(ctx context.Context, pod *v1.Pod) error {
	var err error
	switch {
	case e.Claims != nil:
		if err = e.Claims.Prepare(ctx, pod); err == nil {
			err = e.checkCDI(ctx, pod)
		}
	case len(pod.Spec.ResourceClaims) > 0 || pod.Status.ExtendedResourceClaimStatus != nil:
		err = errors.New("prepare dynamic resources: this node prepares no ResourceClaims")
	}
	if err != nil {
		e.Recorder.Eventf(pod, v1.EventTypeWarning, EventFailedPrepareDynamicResources, "Failed to prepare dynamic resources: %v", err)
		return fmt.Errorf("preparing dynamic resources: %w", err)
	}
	return nil
}

// checkCDI refuses a pod whose containers get CDI devices from their
// claims when the runtime does not apply CDI devices (containerd 1.6, or
// containerd with enable_cdi off): the containers would run without them.
func (e *Executor) checkCDI(ctx context.Context, pod *v1.Pod) error {
	var ids []string
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		got, err := e.Claims.CDIDevices(pod, &c)
		if err != nil {
			return fmt.Errorf("prepare dynamic resources: %w", err)
		}
		ids = append(ids, got...)
	}
	if len(ids) == 0 {
		return nil
	}
	f, err := e.features(ctx)
	if err != nil {
		return fmt.Errorf("prepare dynamic resources: reading whether the container runtime applies CDI devices: %w", err)
	}
	if !f.CDI {
		return fmt.Errorf("prepare dynamic resources: the container runtime does not apply CDI devices (enable_cdi is off, or containerd is older than 1.7), so the containers would run without %s", strings.Join(ids, ", "))
	}
	return nil
}

// UnprepareClaims takes the pod off the ResourceClaims it uses,
// unpreparing those no other pod uses (see ClaimPreparer). Call it once
// none of the pod's containers runs and before its status says it is
// done; without a ClaimPreparer it does nothing.
func (e *Executor) UnprepareClaims(ctx context.Context, pod types.UID) error {
	if e.Claims == nil {
		return nil
	}
	return e.Claims.Unprepare(ctx, pod)
}

// claimDevices adds the CDI devices of the claims container c uses to cfg.
func (e *Executor) claimDevices(pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error {
	if e.Claims == nil {
		return nil
	}
	ids, err := e.Claims.CDIDevices(pod, c)
	if err != nil {
		return err
	}
	for _, id := range ids {
		cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: id})
	}
	return nil
}

// sandbox is the sandbox containers are started in.
type sandbox struct {
	id     string
	config *runtimeapi.PodSandboxConfig
	ips    []string
}

func (e *Executor) sandboxConfig(pod *v1.Pod, attempt uint32, userns *runtimeapi.UserNamespace) (*runtimeapi.PodSandboxConfig, error) {
	opts := e.Sandbox
	opts.Attempt = attempt
	opts.UserNamespace = userns
	if e.Cgroups != nil {
		opts.CgroupParent = e.Cgroups.PodParent(pod)
	}
	cfg, err := criconfig.SandboxConfig(pod, opts)
	if err != nil {
		return nil, fmt.Errorf("building sandbox config: %w", err)
	}
	return cfg, nil
}

func (e *Executor) ensureSandbox(ctx context.Context, pod *v1.Pod, rt state.PodRuntime, st *state.PodState, a plan.PodActions, save SaveFunc) (*sandbox, error) {
	if !a.CreateSandbox {
		attempt, ips := uint32(0), []string(nil)
		for _, s := range rt.Sandboxes {
			if s.ID == a.SandboxID {
				attempt, ips = s.Attempt, s.IPs
			}
		}
		userns, err := e.userNamespace(pod)
		if err != nil {
			return nil, err
		}
		cfg, err := e.sandboxConfig(pod, attempt, userns)
		if err != nil {
			return nil, err
		}
		return &sandbox{id: a.SandboxID, config: cfg, ips: ips}, nil
	}
	handler, userns, err := e.isolation(ctx, pod)
	if err != nil {
		// Shown as is: the kubelet's messages.
		return nil, e.sandboxFailed(ctx, pod, st, save, err)
	}
	cfg, err := e.sandboxConfig(pod, a.Attempt, userns)
	if err != nil {
		return nil, e.sandboxFailed(ctx, pod, st, save, err)
	}
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return nil, e.sandboxFailed(ctx, pod, st, save, fmt.Errorf("creating pod log directory: %w", err))
	}
	if err := containerlogs.MarkPodDir(cfg.LogDirectory, e.NodeName); err != nil {
		return nil, e.sandboxFailed(ctx, pod, st, save, err)
	}
	var id string
	var createErr error
	if err := e.Gate.Do(ctx, pod.UID, func() error {
		id, createErr = e.createSandbox(ctx, pod, cfg, handler)
		return nil
	}); err != nil {
		// Deleted while waiting: nothing was created.
		return nil, err
	}
	if createErr != nil {
		return nil, e.sandboxFailed(ctx, pod, st, save, createErr)
	}
	first := st.SandboxID == "" && st.SandboxFailure == nil
	st.RecordSandbox(id, a.Attempt)
	if !first || !startsContainers(a) {
		if err := save(); err != nil {
			return nil, err
		}
	}
	// Else the state is saved with the first container's start, in this
	// call: a crash before that leaves no checkpoint, and the restarted
	// agent adopts the sandbox from its labels, which say all that was
	// recorded here (its ID and attempt).
	status, err := e.Runtime.PodSandboxStatus(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading status of new sandbox %s: %w", id, err)
	}
	sb := &sandbox{id: id, config: cfg, ips: state.SandboxFromCRI(status).IPs}
	if !pod.Spec.HostNetwork {
		if err := e.Volumes.WriteEtcHosts(pod, sb.ips); err != nil {
			return nil, fmt.Errorf("writing /etc/hosts: %w", err)
		}
	}
	log.FromContext(ctx).V(1).Info("Created sandbox", "sandbox", id, "attempt", a.Attempt, "ips", sb.ips, "runtimeHandler", handler)
	return sb, nil
}

// createSandbox makes the pod's cgroup and its sandbox.
func (e *Executor) createSandbox(ctx context.Context, pod *v1.Pod, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	if e.Cgroups != nil {
		if err := e.Cgroups.EnsurePod(pod); err != nil {
			return "", err
		}
	}
	id, err := e.Runtime.RunPodSandbox(ctx, cfg, handler)
	if err != nil {
		return "", fmt.Errorf("creating sandbox: %w", err)
	}
	return id, nil
}

// startsContainers reports whether the plan starts any container.
func startsContainers(a plan.PodActions) bool {
	return len(a.InitContainersToStart) > 0 || len(a.ContainersToStart) > 0 || len(a.EphemeralContainersToStart) > 0
}

// sandboxFailed reports a failed sandbox creation with a
// FailedCreatePodSandBox Event and in the pod's state (the status shows it),
// and returns err for the caller to retry with back-off.
func (e *Executor) sandboxFailed(ctx context.Context, pod *v1.Pod, st *state.PodState, save SaveFunc, err error) error {
	msg := fmt.Sprintf("Failed to create pod sandbox: %v", err)
	e.Recorder.Event(pod, v1.EventTypeWarning, EventFailedCreatePodSandBox, msg)
	st.RecordSandboxFailure(msg, e.now())
	if serr := save(); serr != nil {
		log.FromContext(ctx).Error(serr, "Unable to save pod state")
	}
	return err
}

// startContainer pulls, creates and starts one container, recording the
// attempt and any failure in st. The returned error only says the start
// failed; it has been recorded and reported already.
func (e *Executor) startContainer(ctx context.Context, pod *v1.Pod, sb *sandbox, s plan.ContainerStart, st *state.PodState, save SaveFunc) error {
	c := s.Spec(pod)
	// fail records the failure; image, when set, is the image volume's
	// image whose pull failed.
	fail := func(reason, message, image string) error {
		if err := ctx.Err(); err != nil {
			// Cancelled (the pod is being deleted): not the container's fault.
			return err
		}
		if image != "" {
			st.RecordVolumeImageFailure(s.Name, image, reason, message, e.now())
		} else {
			st.RecordFailure(s.Name, reason, message, e.now())
		}
		if err := save(); err != nil {
			log.FromContext(ctx).Error(err, "Unable to save pod state", "container", s.Name)
		}
		return errors.New(reason + ": " + message)
	}
	pullSecrets := e.pullSecrets(ctx, pod)
	imageRef, img, err := e.Images.EnsureImage(ctx, pod, c, pullSecrets, sb.config)
	if err != nil {
		reason, message := e.ImageReason(err)
		e.Recorder.Eventf(pod, v1.EventTypeWarning, EventFailed, "Error: %s", reason)
		return fail(reason, message, "")
	}
	volumeImages, err := e.volumeImages(ctx, pod, c, pullSecrets, sb.config)
	if err != nil {
		var refused *imageVolumesRefused
		if errors.As(err, &refused) {
			e.Recorder.Eventf(pod, v1.EventTypeWarning, EventFailed, "Error: %v", err)
			return fail(state.ReasonCreateContainerConfigError, err.Error(), "")
		}
		image := ""
		if pull := (*volumeImageError)(nil); errors.As(err, &pull) {
			image = pull.image
		}
		reason, message := e.ImageReason(err)
		e.Recorder.Eventf(pod, v1.EventTypeWarning, EventFailed, "Error: %s", reason)
		return fail(reason, message, image)
	}
	cfg, err := e.containerConfig(ctx, pod, c, sb, s, imageRef, img, volumeImages)
	if err != nil {
		e.Recorder.Eventf(pod, v1.EventTypeWarning, EventFailed, "Error: %v", err)
		return fail(state.ReasonCreateContainerConfigError, err.Error(), "")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st.RecordStart(s.Name, s.RestartCount, s.PrevFinishedAt, s.MaxCrashLoopBackOff, e.now())
	var id string
	if err := e.Gate.Do(ctx, pod.UID, func() (err error) {
		id, err = e.Runtime.CreateContainer(ctx, sb.id, cfg, sb.config)
		return err
	}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.Recorder.Eventf(pod, v1.EventTypeWarning, EventFailed, "Error: %v", err)
		return fail(state.ReasonCreateContainerError, err.Error(), "")
	}
	st.RecordActuated(s.Name, id, c.Resources)
	e.linkLog(ctx, pod, c.Name, id, sb.config.GetLogDirectory(), cfg.GetLogPath())
	if err := save(); err != nil {
		return fail(state.ReasonCreateContainerError, err.Error(), "")
	}
	e.Recorder.Eventf(pod, v1.EventTypeNormal, EventCreated, "Created container: %s", c.Name)
	if err := ctx.Err(); err != nil {
		// Deleted meanwhile: the created container is stopped and removed
		// with the pod, never started.
		return err
	}
	if err := e.Gate.Do(ctx, pod.UID, func() error { return e.Runtime.StartContainer(ctx, id) }); err != nil {
		if ctx.Err() != nil {
			// Deleted while waiting: created, never started, as above.
			return ctx.Err()
		}
		e.Recorder.Eventf(pod, v1.EventTypeWarning, EventFailed, "Error: %v", err)
		return fail(state.ReasonRunContainerError, err.Error(), "")
	}
	e.Recorder.Eventf(pod, v1.EventTypeNormal, EventStarted, "Started container %s", c.Name)
	if err := e.runPostStart(ctx, pod, c, id, sb.ips, s.KillGracePeriodSeconds); err != nil {
		return fail(state.ReasonPostStartHookError, err.Error(), "")
	}
	log.FromContext(ctx).V(1).Info("Started container", "container", c.Name, "id", id, "restartCount", s.RestartCount)
	return nil
}

// containerConfig builds the CRI config of one container start; img is the
// status of the image imageRef names when the caller has it, nil to read it;
// volumeImages are the references of the image volumes c mounts.
func (e *Executor) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, sb *sandbox, s plan.ContainerStart, imageRef string, img *runtimeapi.Image, volumeImages map[string]string) (*runtimeapi.ContainerConfig, error) {
	target, err := s.Target(pod)
	if err != nil {
		return nil, err
	}
	cms, secrets, err := e.envObjects(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	node, err := e.Node(ctx)
	if err != nil {
		return nil, err
	}
	if img == nil {
		if img, err = e.Runtime.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef}); err != nil {
			return nil, fmt.Errorf("reading the user of image %s: %w", imageRef, err)
		}
	}
	imageUID, imageUser := criconfig.ImageUser(img)
	serviceEnv, err := e.ServiceEnv(ctx, pod)
	if err != nil {
		return nil, fmt.Errorf("services have not yet been read at least once, cannot construct envvars: %w", err)
	}
	opts := criconfig.ContainerOptions{
		RestartCount:      s.RestartCount,
		SandboxID:         sb.id,
		PodIPs:            sb.ips,
		HostIPs:           node.HostIPs,
		ImageRef:          imageRef,
		ImageUID:          imageUID,
		ImageUser:         imageUser,
		ConfigMaps:        cms,
		Secrets:           secrets,
		ServiceEnv:        serviceEnv,
		NodeAllocatable:   node.Allocatable,
		ExtraLabels:       e.Sandbox.ExtraLabels,
		SeccompRoot:       e.Sandbox.SeccompProfileRoot,
		SeccompDefault:    e.Sandbox.SeccompDefault,
		TargetContainerID: target,
		UserNamespace:     sb.config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(),
		Resources:         e.Resources,
	}
	if features.Enabled(features.EnvFiles) {
		opts.OpenVolumeFile = func(volume, path string) (io.ReadCloser, error) {
			return e.Volumes.OpenVolumeFile(pod, volume, path)
		}
	}
	// The environment is resolved once, before the mounts as the kubelet
	// does: subPathExpr expands with the variables the container gets.
	if opts.Env, err = criconfig.ResolveEnv(pod, c, opts); err != nil {
		return nil, err
	}
	if opts.Mounts, err = e.Volumes.Mounts(pod, c, int32(s.RestartCount), opts.Env, volumeImages); err != nil {
		return nil, err
	}
	if err := e.recursiveReadOnly(ctx, pod, c, opts.Mounts); err != nil {
		return nil, err
	}
	devices, err := e.Volumes.Devices(pod, c)
	if err != nil {
		return nil, err
	}
	if e.Devices != nil {
		if opts.DeviceEnv, err = e.Devices.ContainerEnv(pod, c.Name); err != nil {
			return nil, err
		}
	}
	cfg, err := criconfig.ContainerConfig(pod, c, opts)
	if err != nil {
		return nil, err
	}
	cfg.Devices = append(cfg.Devices, devices...)
	if err := e.claimDevices(pod, c, cfg); err != nil {
		return nil, err
	}
	if e.Devices != nil {
		if err := e.Devices.ContainerDevices(ctx, pod, c.Name, cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// pullSecrets reads the pod's imagePullSecrets; a missing one is skipped,
// as the kubelet does, and the pull is tried without it.
func (e *Executor) pullSecrets(ctx context.Context, pod *v1.Pod) []*v1.Secret {
	var out []*v1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := e.Objects.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			log.FromContext(ctx).Error(err, "Unable to read image pull secret, pulling without it", "secret", ref.Name)
			continue
		}
		out = append(out, s)
	}
	return out
}

// envObjects fetches the ConfigMaps and Secrets c's environment names. A
// missing object is left out of the maps; ContainerConfig decides whether
// that is an error (it is unless the reference is optional).
func (e *Executor) envObjects(ctx context.Context, pod *v1.Pod, c *v1.Container) (map[string]*v1.ConfigMap, map[string]*v1.Secret, error) {
	cms, secrets := map[string]*v1.ConfigMap{}, map[string]*v1.Secret{}
	getCM := func(name string) error {
		if _, done := cms[name]; done || name == "" {
			return nil
		}
		cm, err := e.Objects.ConfigMap(ctx, pod.Namespace, name)
		if err != nil {
			return ignoreNotFound(err)
		}
		cms[name] = cm
		return nil
	}
	getSecret := func(name string) error {
		if _, done := secrets[name]; done || name == "" {
			return nil
		}
		s, err := e.Objects.Secret(ctx, pod.Namespace, name)
		if err != nil {
			return ignoreNotFound(err)
		}
		secrets[name] = s
		return nil
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			if err := getCM(from.ConfigMapRef.Name); err != nil {
				return nil, nil, err
			}
		}
		if from.SecretRef != nil {
			if err := getSecret(from.SecretRef.Name); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, env := range c.Env {
		if env.ValueFrom == nil {
			continue
		}
		if ref := env.ValueFrom.ConfigMapKeyRef; ref != nil {
			if err := getCM(ref.Name); err != nil {
				return nil, nil, err
			}
		}
		if ref := env.ValueFrom.SecretKeyRef; ref != nil {
			if err := getSecret(ref.Name); err != nil {
				return nil, nil, err
			}
		}
	}
	return cms, secrets, nil
}
