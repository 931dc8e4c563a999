package eviction

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is an eviction signal, named as the kubelet names it.
type Signal string

// The signals nodelet measures.
const (
	SignalMemoryAvailable   Signal = "memory.available"
	SignalNodeFsAvailable   Signal = "nodefs.available"
	SignalNodeFsInodesFree  Signal = "nodefs.inodesFree"
	SignalImageFsAvailable  Signal = "imagefs.available"
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	SignalPIDAvailable      Signal = "pid.available"
)

// Resources reclaimed for a signal, as the kubelet's messages name them.
const (
	ResourceInodes v1.ResourceName = "inodes"
	ResourcePIDs   v1.ResourceName = "pids"
)

// signals are the known signals in eviction priority order: memory first,
// then disk, then processes.
var signals = []Signal{
	SignalMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree,
	SignalImageFsAvailable, SignalImageFsInodesFree, SignalPIDAvailable,
}

// Resource is what evicting for the signal reclaims.
func (s Signal) Resource() v1.ResourceName {
	switch s {
	case SignalMemoryAvailable:
		return v1.ResourceMemory
	case SignalNodeFsAvailable, SignalImageFsAvailable:
		return v1.ResourceEphemeralStorage
	case SignalNodeFsInodesFree, SignalImageFsInodesFree:
		return ResourceInodes
	case SignalPIDAvailable:
		return ResourcePIDs
	}
	return ""
}

// Condition is the node condition the signal's thresholds set.
func (s Signal) Condition() v1.NodeConditionType {
	switch s {
	case SignalMemoryAvailable:
		return v1.NodeMemoryPressure
	case SignalPIDAvailable:
		return v1.NodePIDPressure
	}
	return v1.NodeDiskPressure
}

// Disk reports whether the signal is about a filesystem, whose pressure
// node-level reclaim (dead containers, unused images) may relieve.
func (s Signal) Disk() bool { return s.Condition() == v1.NodeDiskPressure }

// Value is a threshold's amount: an absolute quantity or a percentage of
// the signal's capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float64
}

func (v Value) zero() bool {
	if v.Quantity != nil {
		return v.Quantity.IsZero()
	}
	return v.Percentage == 0
}

// Of is the value in the signal's unit for a capacity of capacity.
func (v Value) Of(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(capacity) * v.Percentage / 100)
}

// Threshold is one eviction threshold: the signal's available amount must
// not fall below Value.
type Threshold struct {
	Signal Signal
	Value  Value
	// Soft thresholds evict only after they have been met for GracePeriod,
	// and stop pods with at most evictionMaxPodGracePeriod; hard ones evict
	// at once and stop pods in one second.
	Soft        bool
	GracePeriod time.Duration
	// MinReclaim is how much more than Value must be available before a
	// threshold met is resolved; nil is none.
	MinReclaim *Value
}

// Key names a threshold among the configured ones.
func (t Threshold) Key() string {
	if t.Soft {
		return "soft/" + string(t.Signal)
	}
	return "hard/" + string(t.Signal)
}

// ParseValue parses "100Mi" or "10%".
func ParseValue(s string) (Value, error) {
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || f < 0 || f > 100 {
			return Value{}, fmt.Errorf("%q is not a percentage between 0%% and 100%%", s)
		}
		return Value{Percentage: f}, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return Value{}, fmt.Errorf("parsing %q: %w", s, err)
	}
	if q.Sign() < 0 {
		return Value{}, fmt.Errorf("%q is negative", s)
	}
	return Value{Quantity: &q}, nil
}

// Config is the part of the node's configuration the decisions read.
type Config struct {
	Thresholds []Threshold
	// TransitionPeriod is how long a pressure condition stays after its
	// last observation (evictionPressureTransitionPeriod).
	TransitionPeriod time.Duration
	// MaxPodGracePeriod caps the grace period of a pod evicted for a soft
	// threshold (evictionMaxPodGracePeriod, seconds); zero or less: the
	// pod's own.
	MaxPodGracePeriod int64
}

// ParseThresholds parses evictionHard, evictionSoft,
// evictionSoftGracePeriod and evictionMinimumReclaim. A threshold of 0 or
// 0% is no threshold, as for the kubelet. Signals nodelet does not know
// are an error.
func ParseThresholds(hard, soft, grace, minReclaim map[string]string) ([]Threshold, error) {
	var out []Threshold
	parse := func(field string, m map[string]string, isSoft bool) error {
		for k, v := range m {
			sig := Signal(k)
			if !slices.Contains(signals, sig) {
				return fmt.Errorf("%s: unknown signal %q", field, k)
			}
			val, err := ParseValue(v)
			if err != nil {
				return fmt.Errorf("%s[%s]: %w", field, k, err)
			}
			if val.zero() {
				continue
			}
			t := Threshold{Signal: sig, Value: val, Soft: isSoft}
			if isSoft {
				g, ok := grace[k]
				if !ok {
					return fmt.Errorf("evictionSoftGracePeriod[%s]: every soft threshold needs a grace period", k)
				}
				if t.GracePeriod, err = time.ParseDuration(g); err != nil || t.GracePeriod < 0 {
					return fmt.Errorf("evictionSoftGracePeriod[%s]: %q is not a duration", k, g)
				}
			}
			if r, ok := minReclaim[k]; ok {
				mr, err := ParseValue(r)
				if err != nil {
					return fmt.Errorf("evictionMinimumReclaim[%s]: %w", k, err)
				}
				t.MinReclaim = &mr
			}
			out = append(out, t)
		}
		return nil
	}
	if err := parse("evictionHard", hard, false); err != nil {
		return nil, err
	}
	if err := parse("evictionSoft", soft, true); err != nil {
		return nil, err
	}
	sortThresholds(out)
	return out, nil
}

// sortThresholds orders thresholds by eviction priority (memory, disk,
// processes), hard before soft.
func sortThresholds(ts []Threshold) {
	slices.SortStableFunc(ts, func(a, b Threshold) int {
		if d := slices.Index(signals, a.Signal) - slices.Index(signals, b.Signal); d != 0 {
			return d
		}
		switch {
		case a.Soft == b.Soft:
			return 0
		case !a.Soft:
			return -1
		}
		return 1
	})
}

// Observation is one signal's measure: how much is available out of its
// capacity.
type Observation struct {
	Available int64
	Capacity  int64
}

// Observations are the signals measured in one round; a signal missing is
// unknown and meets no threshold.
type Observations map[Signal]Observation

// Met returns the thresholds whose signal's available amount is below
// their value (plus their minimum reclaim when enforceMinReclaim), in the
// order given.
func Met(ts []Threshold, obs Observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok || o.Capacity <= 0 {
			continue
		}
		want := t.Value.Of(o.Capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			want += t.MinReclaim.Of(o.Capacity)
		}
		if o.Available < want {
			out = append(out, t)
		}
	}
	return out
}
