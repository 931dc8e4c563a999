package v1alpha1

import (
	"testing"
)

func TestMemoryDefaults(t *testing.T) {
	c := valid()
	if c.FailSwapOn == nil || !*c.FailSwapOn {
		t.Errorf("failSwapOn: got %v, want true", c.FailSwapOn)
	}
	if c.MemorySwap.SwapBehavior != NoSwap {
		t.Errorf("memorySwap.swapBehavior: got %q, want NoSwap", c.MemorySwap.SwapBehavior)
	}
	if c.MemoryThrottlingFactor != nil {
		t.Errorf("memoryThrottlingFactor: got %v, want unset", *c.MemoryThrottlingFactor)
	}
	if c.MemoryReservationPolicy != MemoryReservationNone {
		t.Errorf("memoryReservationPolicy: got %q, want None", c.MemoryReservationPolicy)
	}
	off := false
	c = &NodeletConfiguration{NodeName: "a", FailSwapOn: &off, MemorySwap: MemorySwapConfiguration{SwapBehavior: LimitedSwap}}
	SetDefaults(c)
	if *c.FailSwapOn || c.MemorySwap.SwapBehavior != LimitedSwap {
		t.Errorf("defaulting changed set fields: failSwapOn %v, swapBehavior %q", *c.FailSwapOn, c.MemorySwap.SwapBehavior)
	}
}

func TestValidateMemory(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	cases := []struct {
		name      string
		mutate    func(*NodeletConfiguration)
		memoryQoS bool
		wantField string // empty: valid
	}{
		{"defaults", func(*NodeletConfiguration) {}, false, ""},
		{"limited swap", func(c *NodeletConfiguration) { c.MemorySwap.SwapBehavior = LimitedSwap }, false, ""},
		{"unknown swap behaviour", func(c *NodeletConfiguration) { c.MemorySwap.SwapBehavior = "UnlimitedSwap" }, false, "memorySwap.swapBehavior"},
		{"factor", func(c *NodeletConfiguration) { c.MemoryThrottlingFactor = f(0.8) }, true, ""},
		{"factor 1", func(c *NodeletConfiguration) { c.MemoryThrottlingFactor = f(1) }, true, ""},
		{"factor 0", func(c *NodeletConfiguration) { c.MemoryThrottlingFactor = f(0) }, true, "memoryThrottlingFactor"},
		{"factor above 1", func(c *NodeletConfiguration) { c.MemoryThrottlingFactor = f(1.5) }, true, "memoryThrottlingFactor"},
		{"factor without the gate", func(c *NodeletConfiguration) { c.MemoryThrottlingFactor = f(0.8) }, false, "memoryThrottlingFactor"},
		{"previous default without the gate", func(c *NodeletConfiguration) { c.MemoryThrottlingFactor = f(0.9) }, false, ""},
		{"tiered reservation", func(c *NodeletConfiguration) { c.MemoryReservationPolicy = MemoryReservationTiered }, true, ""},
		{"tiered reservation without the gate", func(c *NodeletConfiguration) { c.MemoryReservationPolicy = MemoryReservationTiered }, false, "memoryReservationPolicy"},
		{"unknown reservation policy", func(c *NodeletConfiguration) { c.MemoryReservationPolicy = "All" }, true, "memoryReservationPolicy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(c)
			errs := append(Validate(c), ValidateMemoryQoS(c, tc.memoryQoS)...)
			if tc.wantField == "" {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.wantField {
					return
				}
			}
			t.Fatalf("want an error on %s, got %v", tc.wantField, errs)
		})
	}
}
