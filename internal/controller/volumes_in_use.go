package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nodelet/nodelet/internal/csi"
)

// volumesInUseFor returns the tracker of the node's volumes in use, shared
// by the CSI publisher (which marks volumes in use and waits until the
// Node's status lists them) and the node reconciler (which writes them to
// the status and says what it wrote), building it the first time. A volume
// becoming in use kicks the node reconciler, so the publish does not wait
// for the next status update.
func volumesInUseFor(d *Deps) *csi.InUse {
	if d.volumesInUse != nil {
		return d.volumesInUse
	}
	d.volumesInUse = csi.NewInUse(d.Config.RootDir, kickNode(d))
	return d.volumesInUse
}

// nodeKickFor returns the channel that asks the node reconciler for a
// status write, making it the first time.
func nodeKickFor(d *Deps) chan event.GenericEvent {
	if d.nodeKick == nil {
		d.nodeKick = make(chan event.GenericEvent, 1)
	}
	return d.nodeKick
}

// kickNode returns a function that asks the node reconciler for a status
// write, without waiting: one already asked for is enough.
func kickNode(d *Deps) func() {
	kick := nodeKickFor(d)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.Config.NodeName}}
	return func() {
		select {
		case kick <- event.GenericEvent{Object: node}:
		default: // a write is already asked for
		}
	}
}
