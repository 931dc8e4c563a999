package prepuller

import (
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubelet's image pull back-off: the first retry after InitialBackoff,
// each further one after twice the last wait, at most MaxBackoff; a
// failure more than 2×MaxBackoff after the one before starts over.
const (
	InitialBackoff = 10 * time.Second
	MaxBackoff     = 300 * time.Second
)

// State is what the pre-puller checkpoints: the images whose last pull
// failed, and when each may be tried again. An image that is present, or
// no longer named, has no entry.
type State struct {
	Failures map[string]Failure `json:"failures,omitempty"`
}

// Failure is the pull history of one image that has failed to pull.
type Failure struct {
	// Count is the number of failed pulls since the last success.
	Count int `json:"count"`
	// Last is when the last pull failed.
	Last time.Time `json:"last"`
	// Backoff is how long after Last the image may be tried again.
	Backoff metav1.Duration `json:"backoff"`
	// Message is the runtime's error of the last pull.
	Message string `json:"message,omitempty"`
}

// NextAttempt is when the image may be pulled again.
func (f Failure) NextAttempt() time.Time { return f.Last.Add(f.Backoff.Duration) }

// RecordFailure returns f after one more pull failed at now with message.
func RecordFailure(f Failure, now time.Time, message string) Failure {
	backoff := InitialBackoff
	if f.Count > 0 && now.Sub(f.Last) <= 2*MaxBackoff {
		backoff = min(2*f.Backoff.Duration, MaxBackoff)
		backoff = max(backoff, InitialBackoff)
	}
	return Failure{
		Count:   f.Count + 1,
		Last:    now,
		Backoff: metav1.Duration{Duration: backoff},
		Message: message,
	}
}

// Plan is what to do with the named images at one moment.
type Plan struct {
	// Pull lists the missing images to pull now, in the annotation's order.
	Pull []string
	// BackingOff are the missing images whose last pull failed and whose
	// back-off has not passed, with when each may be tried again.
	BackingOff map[string]time.Time
}

// PlanPulls decides which of images to pull at now, given which are
// present in the runtime and the checkpointed failures: a present image
// needs nothing; a missing one is pulled unless its back-off is running.
func PlanPulls(images []string, present map[string]bool, state State, now time.Time) Plan {
	p := Plan{BackingOff: map[string]time.Time{}}
	for _, image := range images {
		if present[image] {
			continue
		}
		if f, ok := state.Failures[image]; ok && now.Before(f.NextAttempt()) {
			p.BackingOff[image] = f.NextAttempt()
			continue
		}
		p.Pull = append(p.Pull, image)
	}
	return p
}

// Prune returns state without the entries of images that are present or
// not named any more, and whether it removed any.
func Prune(state State, images []string, present map[string]bool) (State, bool) {
	out := State{Failures: maps.Clone(state.Failures)}
	changed := false
	for image := range state.Failures {
		if present[image] || !slices.Contains(images, image) {
			delete(out.Failures, image)
			changed = true
		}
	}
	return out, changed
}

// RequeueAfter is how long to wait before looking again: the interval, or
// less when the back-off of a missing image ends sooner. Zero when no
// image is named (a change of the annotation starts the next look).
func RequeueAfter(images []string, present map[string]bool, state State, now time.Time, interval time.Duration) time.Duration {
	if len(images) == 0 {
		return 0
	}
	wait := interval
	for _, image := range images {
		f, ok := state.Failures[image]
		if present[image] || !ok {
			continue
		}
		// A back-off that has ended already (the pull took longer than it)
		// is retried at once, but never sooner than a second from now.
		wait = min(wait, max(f.NextAttempt().Sub(now), time.Second))
	}
	return wait
}
