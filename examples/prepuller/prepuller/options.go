package prepuller

import (
	"fmt"
	"time"
)

// The environment variables OptionsFromEnv reads. nodelet's flag parser
// refuses flags it does not know, so an extension takes its options from
// the environment (or from a file of its own).
const (
	// EnvInterval is how often the images are checked again: a Go
	// duration ("5m", "30s").
	EnvInterval = "PREPULL_INTERVAL"
	// EnvPullTimeout bounds the pull of one image: a Go duration.
	EnvPullTimeout = "PREPULL_PULL_TIMEOUT"
)

// Defaults of Options.
const (
	DefaultInterval    = 5 * time.Minute
	DefaultPullTimeout = 10 * time.Minute
	// MinInterval keeps a typo ("5ms") from turning the re-check into a
	// busy loop against the runtime.
	MinInterval = time.Second
)

// Options tune the pre-puller. A zero field takes its default.
type Options struct {
	// Interval is how often the images are checked again, so that one
	// removed meanwhile is pulled back.
	Interval time.Duration
	// PullTimeout bounds the pull of one image. nodelet's runtime client
	// bounds every pull too (far longer); the shorter bound wins.
	PullTimeout time.Duration
}

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.PullTimeout == 0 {
		o.PullTimeout = DefaultPullTimeout
	}
	return o
}

// OptionsFromEnv reads Options from the environment through lookup
// (os.LookupEnv). An unset or empty variable takes the default; a value
// that is no valid duration, or out of range, is an error naming the
// variable.
func OptionsFromEnv(lookup func(string) (string, bool)) (Options, error) {
	var o Options
	var err error
	if o.Interval, err = durationFromEnv(lookup, EnvInterval, DefaultInterval, MinInterval); err != nil {
		return Options{}, err
	}
	if o.PullTimeout, err = durationFromEnv(lookup, EnvPullTimeout, DefaultPullTimeout, time.Second); err != nil {
		return Options{}, err
	}
	return o, nil
}

func durationFromEnv(lookup func(string) (string, bool), name string, def, minimum time.Duration) (time.Duration, error) {
	v, ok := lookup(name)
	if !ok || v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("invalid %s %q: want a duration such as %s: %w", name, v, def, err)
	}
	if d < minimum {
		return 0, fmt.Errorf("invalid %s %q: must be at least %s", name, v, minimum)
	}
	return d, nil
}
