package v1alpha1

import (
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Swap behaviours (memorySwap.swapBehavior), the kubelet's.
const (
	NoSwap      = "NoSwap"
	LimitedSwap = "LimitedSwap"
)

// Memory reservation policies (memoryReservationPolicy), the kubelet's.
const (
	MemoryReservationNone   = "None"
	MemoryReservationTiered = "TieredReservation"
)

// PreviousDefaultMemoryThrottlingFactor is the memoryThrottlingFactor
// older kubelets defaulted to and wrote into their configuration files:
// the kubelet accepts it without the MemoryQoS feature gate, and so does
// nodelet.
const PreviousDefaultMemoryThrottlingFactor = 0.9

// setMemoryDefaults defaults the swap and memory QoS fields as the kubelet
// does.
func setMemoryDefaults(c *NodeletConfiguration) {
	if c.FailSwapOn == nil {
		t := true
		c.FailSwapOn = &t
	}
	setString(&c.MemorySwap.SwapBehavior, NoSwap)
	setString(&c.MemoryReservationPolicy, MemoryReservationNone)
}

// validateMemory checks the swap and memory QoS fields with the kubelet's
// rules; the rules that depend on the MemoryQoS feature gate are the
// caller's, which knows the gates.
func validateMemory(c *NodeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	behaviours := []string{NoSwap, LimitedSwap}
	switch c.MemorySwap.SwapBehavior {
	case NoSwap, LimitedSwap:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("memorySwap", "swapBehavior"), c.MemorySwap.SwapBehavior, behaviours))
	}
	if f := c.MemoryThrottlingFactor; f != nil && (*f <= 0 || *f > 1) {
		errs = append(errs, field.Invalid(field.NewPath("memoryThrottlingFactor"), strconv.FormatFloat(*f, 'g', -1, 64),
			"must be greater than 0 and at most 1"))
	}
	switch c.MemoryReservationPolicy {
	case MemoryReservationNone, MemoryReservationTiered:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("memoryReservationPolicy"), c.MemoryReservationPolicy,
			[]string{MemoryReservationNone, MemoryReservationTiered}))
	}
	return errs
}

// ValidateMemoryQoS checks the fields that only the MemoryQoS feature gate
// makes meaningful, as the kubelet does: without the gate,
// memoryThrottlingFactor may only be unset or the previous default (0.9)
// and memoryReservationPolicy only None.
func ValidateMemoryQoS(c *NodeletConfiguration, memoryQoS bool) field.ErrorList {
	if memoryQoS {
		return nil
	}
	var errs field.ErrorList
	if f := c.MemoryThrottlingFactor; f != nil && *f != PreviousDefaultMemoryThrottlingFactor {
		errs = append(errs, field.Invalid(field.NewPath("memoryThrottlingFactor"), strconv.FormatFloat(*f, 'g', -1, 64),
			"needs the MemoryQoS feature gate"))
	}
	if c.MemoryReservationPolicy == MemoryReservationTiered {
		errs = append(errs, field.Invalid(field.NewPath("memoryReservationPolicy"), c.MemoryReservationPolicy,
			"needs the MemoryQoS feature gate"))
	}
	return errs
}
