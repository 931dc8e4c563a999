package csi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Timings of the node info writer.
const (
	// nodeInfoResync is how often the CSINode and the Node are checked when
	// nothing changed: a CSINode deleted (or collected with a re-created
	// Node) comes back. As often as the kubelet reports an unchanged Node
	// status (nodeStatusReportFrequency): each check reads the CSINode
	// from the API server, a node at rest's only read.
	nodeInfoResync = 5 * time.Minute
	// nodeInfoRetryBase and nodeInfoRetryMax bound the back-off after a
	// failed write.
	nodeInfoRetryBase = 500 * time.Millisecond
	nodeInfoRetryMax  = 30 * time.Second
	// nodeInfoNodeWait is how often the Node is looked for while it does
	// not exist.
	nodeInfoNodeWait = time.Second
)

// errNoNode says the Node does not exist (yet).
var errNoNode = errors.New("node does not exist")

// NodeInfo writes what the registered drivers reported about this node into
// the API: the node's CSINode (created as soon as the Node exists, with a
// driver entry per driver) and, on the Node, the node ID annotation and the
// topology labels. Changes are queued and written by Start with retries, so
// that a registration is never lost while the API server is unreachable.
// The Node is written with merge patches of those keys only; the CSINode
// with updates, retried on conflict.
type NodeInfo struct {
	nodeName string
	client   client.Client
	reader   client.Reader

	mu sync.Mutex
	// want are the registered drivers and what they reported.
	want map[string]DriverNodeInfo
	// remove are drivers deregistered in this process whose entries have
	// not yet been removed.
	remove sets.Set[string]
	kick   chan struct{}
}

// NewNodeInfo returns the writer for node nodeName: c writes and reads the
// Node (in nodelet, from the cache that watches it), r reads the CSINode
// from the API server (it is not in the cache).
func NewNodeInfo(nodeName string, c client.Client, r client.Reader) *NodeInfo {
	return &NodeInfo{
		nodeName: nodeName,
		client:   c,
		reader:   r,
		want:     map[string]DriverNodeInfo{},
		remove:   sets.New[string](),
		kick:     make(chan struct{}, 1),
	}
}

// InstallDriver queues the entries of a registered driver.
func (n *NodeInfo) InstallDriver(name string, info DriverNodeInfo) {
	n.mu.Lock()
	info.Topology = maps.Clone(info.Topology)
	n.want[name] = info
	n.remove.Delete(name)
	n.mu.Unlock()
	n.poke()
}

// UninstallDriver queues the removal of a deregistered driver's entries.
func (n *NodeInfo) UninstallDriver(name string) {
	n.mu.Lock()
	delete(n.want, name)
	n.remove.Insert(name)
	n.mu.Unlock()
	n.poke()
}

func (n *NodeInfo) poke() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Start writes the queued changes until ctx ends: at once when one is
// queued, after a back-off when a write failed, and every minute anyway.
func (n *NodeInfo) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("csinode").WithValues("node", n.nodeName)
	ctx = log.IntoContext(ctx, logger)
	backoff := workqueue.NewTypedItemExponentialFailureRateLimiter[string](nodeInfoRetryBase, nodeInfoRetryMax)
	wait := time.Duration(0)
	for {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-n.kick:
			timer.Stop()
		case <-timer.C:
		}
		err := n.Sync(ctx)
		if errors.Is(err, errNoNode) {
			// The node controller registers it.
			logger.V(1).Info("Node does not exist yet, CSINode waits for it")
			wait = nodeInfoNodeWait
			continue
		}
		if err != nil {
			wait = backoff.When("sync")
			logger.Error(err, "Failed to write CSI node info, will retry", "retryIn", wait)
			continue
		}
		backoff.Forget("sync")
		wait = nodeInfoResync
	}
}

// Sync writes the node's CSINode and Node once. It writes nothing and
// returns an error matching errNoNode while the Node does not exist: its
// creation is the node controller's.
func (n *NodeInfo) Sync(ctx context.Context) error {
	n.mu.Lock()
	want := maps.Clone(n.want)
	remove := n.remove.Clone()
	n.mu.Unlock()

	node := &corev1.Node{}
	if err := n.client.Get(ctx, types.NamespacedName{Name: n.nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("reading node %s: %w", n.nodeName, errNoNode)
		}
		return fmt.Errorf("reading node %s: %w", n.nodeName, err)
	}
	csiNode, err := n.ensureCSINode(ctx, node)
	if err != nil {
		return err
	}
	// A driver whose topology collides is left out (the others are
	// written) and tried again.
	want, collision := splitCollisions(node, want)
	after, changed := planCSINodeDrivers(csiNode.Spec.Drivers, want, remove)
	owners, ownerChanged := planOwner(csiNode.OwnerReferences, node)
	patch, err := planNodePatch(node, want, remove, csiNode.Spec.Drivers, after)
	if err != nil {
		return err
	}
	if patch != nil {
		if err := n.client.Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
			return fmt.Errorf("patching CSI node IDs and topology labels of node %s: %w", n.nodeName, err)
		}
		log.FromContext(ctx).V(1).Info("Patched CSI node info of node", "patch", string(patch))
	}
	if changed || ownerChanged {
		csiNode.Spec.Drivers = after
		csiNode.OwnerReferences = owners
		// An update carries the resourceVersion read: a conflict fails it
		// and the retry reads again.
		if err := n.client.Update(ctx, csiNode); err != nil {
			return fmt.Errorf("updating CSINode %s: %w", n.nodeName, err)
		}
		log.FromContext(ctx).Info("Updated CSINode", "drivers", driverNames(after))
	}

	n.mu.Lock()
	for name := range remove {
		if _, again := n.want[name]; !again {
			n.remove.Delete(name)
		}
	}
	n.mu.Unlock()
	if collision != nil {
		return fmt.Errorf("labeling node %s with CSI topology: %w", n.nodeName, collision)
	}
	return nil
}

// ensureCSINode reads the node's CSINode, creating it when missing.
func (n *NodeInfo) ensureCSINode(ctx context.Context, node *corev1.Node) (*storagev1.CSINode, error) {
	csiNode := &storagev1.CSINode{}
	err := n.reader.Get(ctx, types.NamespacedName{Name: n.nodeName}, csiNode)
	if err == nil {
		return csiNode, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading CSINode %s: %w", n.nodeName, err)
	}
	csiNode = newCSINode(node)
	if err := n.client.Create(ctx, csiNode); err != nil {
		return nil, fmt.Errorf("creating CSINode %s: %w", n.nodeName, err)
	}
	log.FromContext(ctx).Info("Created CSINode", "nodeUID", node.UID)
	return csiNode, nil
}

func driverNames(ds []storagev1.CSINodeDriver) []string {
	names := make([]string, 0, len(ds))
	for _, d := range ds {
		names = append(names, d.Name)
	}
	return names
}
