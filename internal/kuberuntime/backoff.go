package kuberuntime

import (
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Back-off parameters, the kubelet's defaults.
const (
	// InitialBackOff is the first delay of both back-offs.
	InitialBackOff = 10 * time.Second
	// MaxCrashLoopBackOff caps the delay between restarts of a crashing container.
	MaxCrashLoopBackOff = 5 * time.Minute
	// MaxImageBackOff caps the delay between pulls of an image that fails to pull.
	MaxImageBackOff = 5 * time.Minute
	// CrashLoopResetAfter is how long a container must have run (or the
	// back-off have been idle) for its crash-loop back-off to start over.
	CrashLoopResetAfter = 10 * time.Minute
)

// crashLoopCap is the node's cap of the crash-loop back-off in nanoseconds
// (the configuration's crashLoopBackOff.maxContainerRestartPeriod); 0 means
// MaxCrashLoopBackOff. It is node policy, set once at start-up, so the
// planning functions stay free of configuration plumbing.
var crashLoopCap atomic.Int64

// SetMaxCrashLoopBackOff sets the node's cap of the crash-loop back-off; a
// cap below InitialBackOff is also the first delay. Zero restores the
// kubelet's default.
func SetMaxCrashLoopBackOff(d time.Duration) { crashLoopCap.Store(int64(d)) }

// maxCrashLoopBackOff is the cap in effect.
func maxCrashLoopBackOff() time.Duration {
	if d := time.Duration(crashLoopCap.Load()); d > 0 {
		return d
	}
	return MaxCrashLoopBackOff
}

// nextCrash advances the crash-loop back-off for a restart at now of a
// container that finished at finishedAt: the first restart, or one after the
// container ran CrashLoopResetAfter, starts at InitialBackOff; later ones
// double it up to the cap (MaxCrashLoopBackOff unless the node sets one).
func (b BackOff) nextCrash(finishedAt, now time.Time) BackOff {
	limit := maxCrashLoopBackOff()
	if b.crashExpired(finishedAt, now) {
		return BackOff{Delay: min(InitialBackOff, limit), Updated: now}
	}
	return BackOff{Delay: min(2*b.Delay, limit), Updated: now}
}

func (b BackOff) crashExpired(finishedAt, now time.Time) bool {
	return b.Delay == 0 ||
		finishedAt.Sub(b.Updated) > CrashLoopResetAfter ||
		now.Sub(b.Updated) > 2*maxCrashLoopBackOff()
}

// CrashLoopBackOff reports whether a container that finished at finishedAt
// must not be restarted yet at now, how long is left, and the current delay.
func CrashLoopBackOff(b BackOff, finishedAt, now time.Time) (inBackOff bool, remaining, delay time.Duration) {
	if b.crashExpired(finishedAt, now) {
		return false, 0, 0
	}
	remaining = finishedAt.Add(b.Delay).Sub(now)
	if remaining <= 0 {
		return false, 0, b.Delay
	}
	return true, remaining, b.Delay
}

// nextImage advances the image pull back-off after a failed pull at now.
func (b BackOff) nextImage(now time.Time) BackOff {
	if b.imageExpired(now) {
		return BackOff{Delay: InitialBackOff, Updated: now}
	}
	return BackOff{Delay: min(2*b.Delay, MaxImageBackOff), Updated: now}
}

func (b BackOff) imageExpired(now time.Time) bool {
	return b.Delay == 0 || now.Sub(b.Updated) > 2*MaxImageBackOff
}

// ImagePullBackOff reports whether an image whose pull last failed must not
// be pulled again yet at now, how long is left, and the current delay.
func ImagePullBackOff(b BackOff, now time.Time) (inBackOff bool, remaining, delay time.Duration) {
	if b.imageExpired(now) {
		return false, 0, 0
	}
	remaining = b.Updated.Add(b.Delay).Sub(now)
	if remaining <= 0 {
		return false, 0, b.Delay
	}
	return true, remaining, b.Delay
}

// PodDesc formats a pod the way the kubelet does in messages: name_namespace(uid).
func PodDesc(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

func crashLoopMessage(delay time.Duration, container string, pod *v1.Pod) string {
	return fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, container, PodDesc(pod))
}

func imagePullBackOffMessage(image string, w *WaitingReason) string {
	msg := fmt.Sprintf("Back-off pulling image %q", image)
	if w != nil && w.Reason == ReasonErrImagePull && w.Message != "" {
		msg += ": " + w.Message
	}
	return msg
}

// BackingOff says why a container is not started now and until when.
type BackingOff struct {
	Reason  string
	Message string
	Until   time.Time
}

// containerBackOff reports whether the container must wait before its next
// start: first an image pull back-off left by a failed pull, then the
// crash-loop back-off of its newest exited instance.
func containerBackOff(pod *v1.Pod, c *v1.Container, rt PodRuntime, st PodState, now time.Time) (BackingOff, bool) {
	rec := st.record(c.Name)
	if w := rec.Waiting; w != nil && (w.Reason == ReasonErrImagePull || w.Reason == ReasonImagePullBackOff) {
		if in, remaining, _ := ImagePullBackOff(rec.ImageBackOff, now); in {
			return BackingOff{
				Reason:  ReasonImagePullBackOff,
				Message: imagePullBackOffMessage(c.Image, w),
				Until:   now.Add(remaining),
			}, true
		}
	}
	if prev := rt.latestExited(c.Name); prev != nil {
		if in, remaining, delay := CrashLoopBackOff(rec.CrashBackOff, prev.FinishedAt, now); in {
			return BackingOff{
				Reason:  ReasonCrashLoopBackOff,
				Message: crashLoopMessage(delay, c.Name, pod),
				Until:   now.Add(remaining),
			}, true
		}
	}
	return BackingOff{}, false
}
