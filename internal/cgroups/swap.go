package cgroups

import (
	"errors"
	"strings"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
)

// SwapOn reports whether /proc/swaps (its content) lists a swap area: a
// line besides the header.
func SwapOn(procSwaps []byte) bool {
	return len(strings.Split(strings.TrimSpace(string(procSwaps)), "\n")) > 1
}

// CheckSwap is the kubelet's start-up check of swap: LimitedSwap needs
// cgroup v2, and a node with swap on is refused unless failSwapOn is
// false. Its errors name the field to change.
func CheckSwap(swapOn, failSwapOn bool, behavior string, cgroupV2 bool) error {
	if behavior == criconfig.LimitedSwap && !cgroupV2 {
		return errors.New("memorySwap.swapBehavior: LimitedSwap is supported on cgroup v2 only; this host runs cgroup v1 (use NoSwap)")
	}
	if swapOn && failSwapOn {
		return errors.New("running with swap on is not supported, please disable swap or set failSwapOn (--fail-swap-on) to false")
	}
	return nil
}
