package state

import "time"

// Back-off parameters, the kubelet's defaults.
const (
	// InitialBackOff is the first delay of both back-offs.
	InitialBackOff = 10 * time.Second
	// MaxCrashLoopBackOff caps the delay between restarts of a crashing
	// container unless the node sets another cap
	// (crashLoopBackOff.maxContainerRestartPeriod).
	MaxCrashLoopBackOff = 5 * time.Minute
	// MaxImageBackOff caps the delay between pulls of an image that fails to pull.
	MaxImageBackOff = 5 * time.Minute
	// CrashLoopResetAfter is how long a container must have run (or the
	// back-off have been idle) for its crash-loop back-off to start over.
	CrashLoopResetAfter = 10 * time.Minute
)

// crashLoopCap is the cap of the crash-loop back-off in effect: limit, or
// MaxCrashLoopBackOff when limit is not set.
func crashLoopCap(limit time.Duration) time.Duration {
	if limit > 0 {
		return limit
	}
	return MaxCrashLoopBackOff
}

// nextCrash advances the crash-loop back-off for a restart at now of a
// container that finished at finishedAt: the first restart, or one after
// the container ran CrashLoopResetAfter, starts at InitialBackOff; later
// ones double it up to the cap (limit; zero is MaxCrashLoopBackOff). A cap
// below InitialBackOff is also the first delay.
func (b BackOff) nextCrash(finishedAt, now time.Time, limit time.Duration) BackOff {
	limit = crashLoopCap(limit)
	if b.crashExpired(finishedAt, now, limit) {
		return BackOff{Delay: min(InitialBackOff, limit), Updated: now}
	}
	return BackOff{Delay: min(2*b.Delay, limit), Updated: now}
}

func (b BackOff) crashExpired(finishedAt, now time.Time, limit time.Duration) bool {
	return b.Delay == 0 ||
		finishedAt.Sub(b.Updated) > CrashLoopResetAfter ||
		now.Sub(b.Updated) > 2*crashLoopCap(limit)
}

// CrashLoopBackOff reports whether a container that finished at finishedAt
// must not be restarted yet at now, how long is left, and the current
// delay; limit is the back-off's cap (zero: MaxCrashLoopBackOff).
func CrashLoopBackOff(b BackOff, finishedAt, now time.Time, limit time.Duration) (inBackOff bool, remaining, delay time.Duration) {
	if b.crashExpired(finishedAt, now, limit) {
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
