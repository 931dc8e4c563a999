package planner

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// The reason and message of a pod stopped by its active deadline, and of
// the Event announcing it (the kubelet's).
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// ActiveDeadline reports whether pod has been active on the node for its
// spec.activeDeadlineSeconds or longer at now, counted from start (the
// pod's status.startTime), as the kubelet judges it; when it has not, left
// is the time until it will be. A pod without a deadline is never past it
// (left 0). A pod without a start time yet counts as starting now: not
// past, its whole deadline left.
func ActiveDeadline(pod *v1.Pod, start *metav1.Time, now time.Time) (past bool, left time.Duration) {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return false, 0
	}
	allowed := time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second
	if start == nil || start.IsZero() {
		return false, allowed
	}
	active := now.Sub(start.Time)
	if active >= allowed {
		return true, 0
	}
	return false, allowed - active
}

// podStartTime is the start time the pod's status reports: the one last
// written, else the API server's.
func podStartTime(pod *v1.Pod, st state.PodState) *metav1.Time {
	if st.LastStatus != nil && st.LastStatus.StartTime != nil {
		return st.LastStatus.StartTime
	}
	return pod.Status.StartTime
}

// PastActiveDeadline reports whether a pod that is not finished yet must be
// stopped for good at now because it ran past its active deadline. A pod
// already in a terminal phase keeps that phase and its reason.
func PastActiveDeadline(pod *v1.Pod, st state.PodState, now time.Time) bool {
	if PodFinished(pod) || (st.LastStatus != nil && isTerminalPhase(st.LastStatus.Phase)) {
		return false
	}
	past, _ := ActiveDeadline(pod, podStartTime(pod, st), now)
	return past
}

func isTerminalPhase(p v1.PodPhase) bool {
	return p == v1.PodSucceeded || p == v1.PodFailed
}
