package podcidr

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// FromNode returns the pod CIDRs the control plane gave node:
// spec.podCIDRs, else spec.podCIDR, else none.
func FromNode(node *corev1.Node) []string {
	if node == nil {
		return nil
	}
	if len(node.Spec.PodCIDRs) > 0 {
		return node.Spec.PodCIDRs
	}
	if node.Spec.PodCIDR != "" {
		return []string{node.Spec.PodCIDR}
	}
	return nil
}

// Desired is the value to hand the runtime: the Node's pod CIDRs joined
// with commas when it has some, else the configured podCIDR (empty when
// there is none).
func Desired(nodeCIDRs []string, configured string) string {
	if len(nodeCIDRs) > 0 {
		return strings.Join(nodeCIDRs, ",")
	}
	return configured
}

// ShouldSend reports whether desired must be sent, given sent, the value
// the runtime last accepted ("" when it accepted none yet): never an empty
// value, never the value it has.
func ShouldSend(desired, sent string) bool {
	return desired != "" && desired != sent
}

// Runtime is what an Updater needs of the container runtime (cri.Runtime).
type Runtime interface {
	UpdateRuntimeConfig(ctx context.Context, config *runtimeapi.RuntimeConfig) error
}

// Updater hands the pod CIDRs to the runtime once per value. It is safe
// for concurrent use; calls to the runtime are serialised.
type Updater struct {
	runtime    Runtime
	configured string
	log        logr.Logger

	mu sync.Mutex
	// node is the Node's pod CIDRs as last seen (nil before).
	node []string
	// sent is the value the runtime last accepted.
	sent string
}

// NewUpdater returns an Updater of rt; configured is the configuration's
// podCIDR, comma-separated, used while the Node has none.
func NewUpdater(rt Runtime, configured string, log logr.Logger) *Updater {
	return &Updater{runtime: rt, configured: configured, log: log}
}

// SetNode records the Node's pod CIDRs (FromNode) and sends the desired
// value when it must be sent. It reports whether it sent one.
func (u *Updater) SetNode(ctx context.Context, nodeCIDRs []string) (bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.node = nodeCIDRs
	return u.syncLocked(ctx)
}

// Sync sends the desired value when it must be sent: the configured one
// while no Node pod CIDRs were seen. It reports whether it sent one.
func (u *Updater) Sync(ctx context.Context) (bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.syncLocked(ctx)
}

// Sent returns the value the runtime last accepted.
func (u *Updater) Sent() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sent
}

func (u *Updater) syncLocked(ctx context.Context) (bool, error) {
	want := Desired(u.node, u.configured)
	if !ShouldSend(want, u.sent) {
		return false, nil
	}
	err := u.runtime.UpdateRuntimeConfig(ctx, &runtimeapi.RuntimeConfig{
		NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: want},
	})
	if err != nil {
		return false, fmt.Errorf("failed to update pod CIDR: %w", err)
	}
	u.log.Info("Updating Pod CIDR", "originalPodCIDR", u.sent, "newPodCIDR", want)
	u.sent = want
	return true, nil
}
