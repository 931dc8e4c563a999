// Package dradriver is a stand-in DRA driver for tests: it serves the
// kubelet's DRA service (k8s.io/kubelet/pkg/apis/dra/v1) on a socket of
// its own and registers through a node agent's plugins_registry as the
// kubelet's plugin watcher expects (a DRAPlugin registration socket). It
// answers NodePrepareResources with one CDI device per device allocated
// to it in the claim (read from the API server) and writes the CDI spec
// of those devices: each sets an environment variable naming the device
// and mounts a host directory holding a file that names it. It records
// every call, so a test can see what the agent asked. It also serves and
// announces the DRAResourceHealth service (v1): each stream sends the
// health of the devices SetHealth set, again at each change. It runs in
// the test's process.
package dradriver
