// Package pleg is nodelet's pod lifecycle event generator: a Relister that
// lists the sandboxes and containers nodelet owns every RelistPeriod (or,
// while a ChangeWatcher reports the runtime's changes, at each change, at
// most once a RelistPeriod, and every EventedRelistPeriod otherwise: an
// agent at rest does not ask the runtime every second), compares their IDs and states with the previous list (Diff over two
// Snapshots) and, for every pod whose runtime objects changed, sends a
// generic event carrying a *corev1.Pod stub (name, namespace and UID from
// the kubelet labels on the objects) on a channel that a controller-runtime
// source.Channel consumes, so that the pod reconciler runs again (nodelet's
// event router nudges the pod's worker directly when it has one, and Listed
// and Record let that worker skip a change its last sync saw). A relist
// whose lists hold the same objects as the last one's (cri's brief lists
// hand out unchanged objects again, in any order) reuses its snapshot
// without sorting them; a relist whose lists changed keeps the record of
// every pod whose objects did not (a record never changes once made, so
// Record's readers need no copy). A pod whose objects all disappeared is reported from the previous list. Events are
// never dropped and never block a relist: one the channel cannot take now is
// sent again with the next relist. The Relister is a manager.Runnable that
// runs without leader election, and reports itself unhealthy (Healthy) when
// no relist has succeeded for HealthThreshold, as the kubelet's PLEG check.
package pleg
