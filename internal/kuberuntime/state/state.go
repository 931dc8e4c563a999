package state

import (
	"math"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Waiting reasons the executor records when an action fails, and the ones
// the planner and the status derive; they are what `kubectl get pods` shows.
const (
	ReasonContainerCreating          = "ContainerCreating"
	ReasonPodInitializing            = "PodInitializing"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonErrImagePull               = "ErrImagePull"
	ReasonImagePullBackOff           = "ImagePullBackOff"
	ReasonErrImageNeverPull          = "ErrImageNeverPull"
	ReasonInvalidImageName           = "InvalidImageName"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
	ReasonPostStartHookError         = "PostStartHookError"
	// ReasonFailedCreatePodSandBox is the reason of a failed sandbox
	// creation (PodState.SandboxFailure), the kubelet's Event reason.
	ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"
	// ReasonFailedMount is the reason of a failed volume set-up before the
	// sandbox, the kubelet's Event reason.
	ReasonFailedMount = "FailedMount"
)

// PodState is what nodelet remembers about one pod between reconciles and
// across restarts, because the runtime cannot tell it. It is plain data,
// JSON-encodable, kept in a checkpoint by the caller. The Record* methods
// update it after the executor acted; they do no I/O.
type PodState struct {
	UID types.UID `json:"uid"`
	// SandboxID and SandboxAttempt describe the last sandbox created.
	SandboxID      string `json:"sandboxID,omitempty"`
	SandboxAttempt uint32 `json:"sandboxAttempt,omitempty"`
	// SandboxFailure is why the newest attempt to create a sandbox failed,
	// until one is created.
	SandboxFailure *WaitingReason `json:"sandboxFailure,omitempty"`
	// Containers by container name (init, regular and ephemeral names are
	// unique in a pod).
	Containers map[string]ContainerRecord `json:"containers,omitempty"`
	// Terminating is set once the pod's containers are being stopped for good.
	Terminating *Termination `json:"terminating,omitempty"`
	// Allocated are the resources allocated to the pod's containers, by
	// container name: the spec's at admission, then those of every resize
	// accepted (see resize.go); nil until allocated. AllocatedGeneration
	// is the pod generation they were allocated at.
	Allocated           map[string]v1.ResourceRequirements `json:"allocated,omitempty"`
	AllocatedGeneration int64                              `json:"allocatedGeneration,omitempty"`
	// ResizePending and ResizeInProgress are the pod's resize conditions.
	ResizePending    *ResizeCondition `json:"resizePending,omitempty"`
	ResizeInProgress *ResizeCondition `json:"resizeInProgress,omitempty"`
	// LastStatus is the status last written to the API server; it is the
	// base of the next status (transition times, start time, terminal phase)
	// and lets the caller skip identical patches. Nobody changes it in
	// place: RecordStatus replaces it, and a Clone shares it.
	LastStatus *v1.PodStatus `json:"lastStatus,omitempty"`
}

// ContainerRecord is the per-container part of PodState.
type ContainerRecord struct {
	// RestartCount is the restart count of the newest start attempt.
	RestartCount uint32 `json:"restartCount"`
	// Created is true when that attempt got as far as creating a container,
	// so the next attempt is a restart.
	Created bool `json:"created,omitempty"`
	// LastStart is when the newest start attempt was made.
	LastStart time.Time `json:"lastStart,omitempty"`
	// CrashBackOff delays restarts of a container that keeps exiting.
	CrashBackOff BackOff `json:"crashBackOff,omitempty"`
	// ImageBackOff delays pulls of an image that failed to pull.
	ImageBackOff BackOff `json:"imageBackOff,omitempty"`
	// Waiting is the failure of the newest start attempt, if it failed.
	Waiting *WaitingReason `json:"waiting,omitempty"`
	// Actuated is what the newest instance runs with.
	Actuated *Actuated `json:"actuated,omitempty"`
}

// BackOff is one exponential back-off: Delay is the current delay and
// Updated when it was last advanced (the last restart or pull attempt).
type BackOff struct {
	Delay   time.Duration `json:"delay,omitempty"`
	Updated time.Time     `json:"updated,omitempty"`
}

// WaitingReason is why a container could not be started, as reported in its
// Waiting state.
type WaitingReason struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
	// Image is the image a failed pull was of when it is not the
	// container's own: an image volume's.
	Image string `json:"image,omitempty"`
}

// Termination records the progress of stopping a pod for good.
type Termination struct {
	// StartedAt is when the first stop was planned.
	StartedAt time.Time `json:"startedAt"`
	// GracePeriodSeconds is the grace period in effect.
	GracePeriodSeconds int64 `json:"gracePeriodSeconds"`
	// Deadline is when every container must have been asked to stop.
	Deadline time.Time `json:"deadline"`
	// PreStopDone lists the container IDs whose preStop hook has run.
	PreStopDone []string `json:"preStopDone,omitempty"`
}

// NewPodState returns the empty state of a pod.
func NewPodState(uid types.UID) PodState {
	return PodState{UID: uid, Containers: map[string]ContainerRecord{}}
}

func (s *PodState) record(name string) ContainerRecord {
	return s.Containers[name]
}

func (s *PodState) setRecord(name string, r ContainerRecord) {
	if s.Containers == nil {
		s.Containers = map[string]ContainerRecord{}
	}
	s.Containers[name] = r
}

// RecordSandbox records that the executor created a sandbox.
func (s *PodState) RecordSandbox(id string, attempt uint32) {
	s.SandboxID, s.SandboxAttempt = id, attempt
	s.SandboxFailure = nil
}

// RecordSandboxFailure records that creating a sandbox failed with message
// (the FailedCreatePodSandBox Event's); the pod's PodReadyToStartContainers
// condition shows it until a sandbox is created.
func (s *PodState) RecordSandboxFailure(message string, now time.Time) {
	s.SandboxFailure = &WaitingReason{Reason: ReasonFailedCreatePodSandBox, Message: message, At: now}
}

// RecordMountFailure records that setting up the pod's volumes failed with
// message (the FailedMount Event's); like a sandbox failure, the
// PodReadyToStartContainers condition shows it until a sandbox is created.
func (s *PodState) RecordMountFailure(message string, now time.Time) {
	s.SandboxFailure = &WaitingReason{Reason: ReasonFailedMount, Message: message, At: now}
}

// StartRetryPeriod is how soon a pod whose container could not be created
// is synced again, the kubelet's pod worker back-off.
const StartRetryPeriod = 10 * time.Second

// StartFailed reports whether a container's last start attempt failed before
// the container existed (CreateContainerConfigError, CreateContainerError):
// no crash-loop back-off applies to those, so the pod is synced again after
// StartRetryPeriod, as the kubelet retries them.
func (s *PodState) StartFailed() bool {
	for _, r := range s.Containers {
		if w := r.Waiting; w != nil && (w.Reason == ReasonCreateContainerConfigError || w.Reason == ReasonCreateContainerError) {
			return true
		}
	}
	return false
}

// RecordStart records an attempt to start the named container with
// restartCount. Call it for every attempt the executor makes, whatever its
// outcome (then RecordFailure if it failed), as a restart advances the
// crash-loop back-off whether or not it succeeds: prevFinishedAt is when
// the previous instance exited (zero for a first start, which advances
// none), maxCrashLoop the back-off's cap (zero: MaxCrashLoopBackOff).
func (s *PodState) RecordStart(name string, restartCount uint32, prevFinishedAt time.Time, maxCrashLoop time.Duration, now time.Time) {
	r := s.record(name)
	if !prevFinishedAt.IsZero() {
		r.CrashBackOff = r.CrashBackOff.nextCrash(prevFinishedAt, now, maxCrashLoop)
	}
	r.RestartCount = restartCount
	r.Created = true
	r.LastStart = now
	r.Waiting = nil
	// The image is there: a later pull failure starts its back-off over.
	r.ImageBackOff = BackOff{}
	s.setRecord(name, r)
}

// RecordFailure records that starting the named container failed with the
// given waiting reason (one of the Reason* constants) and message. An image
// pull failure advances the image pull back-off; a failure before the
// container was created makes the next attempt reuse the restart count.
func (s *PodState) RecordFailure(name, reason, message string, now time.Time) {
	r := s.record(name)
	r.Waiting = &WaitingReason{Reason: reason, Message: message, At: now}
	switch reason {
	case ReasonErrImagePull:
		r.ImageBackOff = r.ImageBackOff.nextImage(now)
		r.Created = false
	case ReasonImagePullBackOff, ReasonErrImageNeverPull, ReasonInvalidImageName,
		ReasonCreateContainerConfigError, ReasonCreateContainerError:
		r.Created = false
	}
	s.setRecord(name, r)
}

// RecordVolumeImageFailure is RecordFailure for the pull of image, the
// image of an image volume the named container mounts, so that its
// back-off names the image that failed and not the container's own.
func (s *PodState) RecordVolumeImageFailure(name, image, reason, message string, now time.Time) {
	s.RecordFailure(name, reason, message, now)
	r := s.record(name)
	r.Waiting.Image = image
	s.setRecord(name, r)
}

// BeginTermination records that the pod's containers are being stopped with
// grace seconds (the planner's EffectiveGracePeriod). Calling it again keeps the
// start time and only ever brings the deadline forward, as a repeated delete
// with a shorter grace period does.
func (s *PodState) BeginTermination(grace int64, now time.Time) {
	deadline := now.Add(time.Duration(grace) * time.Second)
	if s.Terminating == nil {
		s.Terminating = &Termination{StartedAt: now, GracePeriodSeconds: grace, Deadline: deadline}
		return
	}
	if deadline.Before(s.Terminating.Deadline) {
		s.Terminating.Deadline = deadline
		s.Terminating.GracePeriodSeconds = grace
	}
}

// EndTermination forgets a finished termination, once every container of
// the pod stopped and a new sandbox is about to be created for it.
func (s *PodState) EndTermination() {
	s.Terminating = nil
}

// RecordPreStopDone records that the preStop hook of a container instance ran
// (successfully or not), so it is not run again.
func (s *PodState) RecordPreStopDone(containerID string, now time.Time) {
	if s.Terminating == nil {
		s.Terminating = &Termination{StartedAt: now, Deadline: now}
	}
	if s.Terminating.PreStopRan(containerID) {
		return
	}
	s.Terminating.PreStopDone = append(s.Terminating.PreStopDone, containerID)
}

// Clone returns a deep copy of s: nothing of it shares memory with s but
// LastStatus, which is never changed in place. Every sync of a pod clones
// its state, and a status is most of a state's size.
func (s PodState) Clone() PodState {
	c := s
	c.SandboxFailure = s.SandboxFailure.clone()
	if s.Containers != nil {
		c.Containers = make(map[string]ContainerRecord, len(s.Containers))
		for name, r := range s.Containers {
			r.Waiting = r.Waiting.clone()
			if r.Actuated != nil {
				a := *r.Actuated
				a.Resources = *r.Actuated.Resources.DeepCopy()
				r.Actuated = &a
			}
			c.Containers[name] = r
		}
	}
	c.Terminating = s.Terminating.Clone()
	if s.Allocated != nil {
		c.Allocated = make(map[string]v1.ResourceRequirements, len(s.Allocated))
		for name, r := range s.Allocated {
			c.Allocated[name] = *r.DeepCopy()
		}
	}
	c.ResizePending = s.ResizePending.clone()
	c.ResizeInProgress = s.ResizeInProgress.clone()
	return c
}

func (w *WaitingReason) clone() *WaitingReason {
	if w == nil {
		return nil
	}
	c := *w
	return &c
}

// RecordStatus records the status that was written to the API server, as
// a copy of its own: the caller may go on changing status.
func (s *PodState) RecordStatus(status v1.PodStatus) {
	s.LastStatus = status.DeepCopy()
}

// Forget drops the records of containers that are no longer in the spec.
func (s *PodState) Forget(pod *v1.Pod) {
	keep := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		keep[c.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		keep[c.Name] = true
	}
	for _, c := range pod.Spec.EphemeralContainers {
		keep[c.Name] = true
	}
	for name := range s.Containers {
		if !keep[name] {
			delete(s.Containers, name)
		}
	}
}

// Clone returns a copy of t (nil for nil).
func (t *Termination) Clone() *Termination {
	if t == nil {
		return nil
	}
	c := *t
	c.PreStopDone = slices.Clone(t.PreStopDone)
	return &c
}

// Equal reports whether t and o record the same termination.
func (t *Termination) Equal(o *Termination) bool {
	if t == nil || o == nil {
		return t == o
	}
	return t.StartedAt.Equal(o.StartedAt) && t.Deadline.Equal(o.Deadline) &&
		t.GracePeriodSeconds == o.GracePeriodSeconds && slices.Equal(t.PreStopDone, o.PreStopDone)
}

// MinimumGracePeriodSeconds is the least time a container is given to
// stop, so that even a forced deletion sends SIGTERM before SIGKILL.
const MinimumGracePeriodSeconds = int64(2)

// StopTimeout returns the timeout in seconds to give StopContainer at now:
// what is left of the grace period, and never less than the minimum.
func (t *Termination) StopTimeout(now time.Time) int64 {
	if t == nil {
		return MinimumGracePeriodSeconds
	}
	left := int64(math.Ceil(t.Deadline.Sub(now).Seconds()))
	return max(left, MinimumGracePeriodSeconds)
}

// PreStopRan reports whether the preStop hook of the container instance id
// has run.
func (t *Termination) PreStopRan(id string) bool {
	if t == nil {
		return false
	}
	return slices.Contains(t.PreStopDone, id)
}
