// Package nodelet is nodelet's public extension API: what a Go module outside
// this repository imports to build its own nodelet binary with reconcilers of
// its own beside the built-in ones.
//
//	func main() {
//		os.Exit(nodelet.Run(os.Args[1:], nodelet.Reconciler{
//			Name:  "prepuller",
//			Setup: prepuller.Setup,
//		}))
//	}
//
// The binary is nodelet: the same flags, configuration file, node API and
// built-in reconcilers (configmap, csi, node, pod, podcidr, secret). An added
// reconciler is turned on and off like a built-in one, through the
// configuration's controllers field or --controllers ("*" runs every
// registered reconciler, "-prepuller" turns one off). Its Setup is called once, after the manager is
// built and before it starts, with the node's context, a *Node.
//
// # The contract
//
// What a reconciler may use, through Node:
//
//   - Manager: the node-scoped controller-runtime manager. Its cache holds only
//     this node's Pods (by spec.nodeName) and this node's Node, with
//     managedFields stripped; a cached read of any other type fails instead
//     of starting a cluster-wide informer. Register controllers
//     (ctrl.NewControllerManagedBy) and runnables (Manager().Add) with it;
//     there is no leader election, every node's nodelet works alone. Give a
//     controller a name of its own and, as nodelet does, set
//     SkipNameValidation when several nodelets may share a process, and
//     NewQueue to NewQueue so that the controller does not wake an agent at
//     rest.
//   - Runtime: the container runtime, reads and images only, restricted to
//     the sandboxes and containers this nodelet made (others are invisible:
//     lists leave them out, reads by ID fail). Stopping, removing and creating
//     pods' containers is the pod reconciler's job alone.
//   - Checkpoints: a store of its own on the node's disk (files 0600 in a
//     0700 directory under rootDir/extensions/<name>), written atomically and
//     checksummed; it survives restarts of nodelet. Other reconcilers'
//     checkpoints and nodelet's own are out of its reach.
//   - Objects: the ConfigMaps and Secrets this node's pods reference, by name,
//     from nodelet's referenced-object store (no API request once held). An
//     object no pod of this node references is ErrNotReferenced: a node
//     cannot read it.
//   - EventRecorder, Logger, Config (a copy of the effective configuration)
//     and NodeName.
//
// What the API server lets it do is what the Node authorizer and the
// NodeRestriction admission plugin let a node do, since nodelet
// authenticates as system:node:<name>: read and update its own Node and
// Lease (not other nodes' — and not the labels NodeRestriction reserves),
// read the pods bound to it and write their status, create Events, read
// only the ConfigMaps, Secrets, PersistentVolumeClaims and service account
// tokens its pods reference. A cluster-wide list or watch is refused
// (Forbidden); so is a read of an object no pod of the node names. Never
// write a Secret's content to a log.
//
// A reconciler must not write a pod's status (the pod reconciler owns it,
// and writes it whole), nor a Node condition type nodelet sets (Ready,
// MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable): set
// conditions of its own with a strategic-merge patch of the status, which
// keeps the others. Its controller's workers are its own, so a slow call
// (an image pull) delays only that controller; every call must still end
// when its context ends.
//
// # Stability
//
// Names exported here keep their meaning within a major version: fields and
// methods may be added to Node and Runtime, none removed or changed. The
// Runtime interface is for callers only; implementing it outside nodelet is
// not supported. Everything under internal/ may change at any time.
package nodelet
