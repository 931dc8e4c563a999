// Package hollow runs many nodelets in one process, each against a fake
// container runtime: the hollow mode, for measuring what nodelet costs an
// API server at cluster scale without a machine per node. Every hollow node
// is a whole nodelet except its runtime: its own controller-runtime manager
// (agent.NewManager) with its own client and credentials, its own informer
// caches, referenced-object store, lease, node status and pod status, the
// reconcilers of controller.Default, its own state directory; only the CRI
// is the in-memory fake of k8s.io/cri-api/pkg/apis/testing, whose sandboxes
// and containers start at once and run until stopped. NodeConfig is the
// configuration every hollow node runs with (registered with Taint, which
// only pods that carry Toleration pass); New builds a Fleet, Run runs it.
package hollow
