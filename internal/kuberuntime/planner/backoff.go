package planner

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/plan"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/podspec"
)

func crashLoopMessage(delay time.Duration, container string, pod *v1.Pod) string {
	return fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, container, podspec.PodDesc(pod))
}

func imagePullBackOffMessage(image string, w *state.WaitingReason) string {
	msg := fmt.Sprintf("Back-off pulling image %q", image)
	if w != nil && w.Reason == state.ReasonErrImagePull && w.Message != "" {
		msg += ": " + w.Message
	}
	return msg
}

// ContainerBackOff reports whether the container must wait before its next
// start at now: first an image pull back-off left by a failed pull, then
// the crash-loop back-off of its newest exited instance, capped at
// maxCrashLoop (zero: state.MaxCrashLoopBackOff).
func ContainerBackOff(pod *v1.Pod, c *v1.Container, rt state.PodRuntime, st state.PodState, now time.Time, maxCrashLoop time.Duration) (plan.BackingOff, bool) {
	rec := st.Containers[c.Name]
	if w := rec.Waiting; w != nil && (w.Reason == state.ReasonErrImagePull || w.Reason == state.ReasonImagePullBackOff) {
		if in, remaining, _ := state.ImagePullBackOff(rec.ImageBackOff, now); in {
			image := c.Image
			if w.Image != "" {
				image = w.Image
			}
			return plan.BackingOff{
				Reason:  state.ReasonImagePullBackOff,
				Message: imagePullBackOffMessage(image, w),
				Until:   now.Add(remaining),
				Image:   image,
			}, true
		}
	}
	if prev := rt.LatestExited(c.Name); prev != nil {
		if in, remaining, delay := state.CrashLoopBackOff(rec.CrashBackOff, prev.FinishedAt, now, maxCrashLoop); in {
			return plan.BackingOff{
				Reason:  state.ReasonCrashLoopBackOff,
				Message: crashLoopMessage(delay, c.Name, pod),
				Until:   now.Add(remaining),
			}, true
		}
	}
	return plan.BackingOff{}, false
}
