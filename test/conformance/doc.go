// Package conformance runs Kubernetes' own e2e conformance specs
// (k8s.io/kubernetes/test/e2e, built by hack/conformance.sh) against a node
// agent in the test harness: an envtest API server configured like a real
// cluster's (Node,RBAC, NodeRestriction, ServiceAccount admission),
// kube-controller-manager and kube-scheduler, a private containerd holding
// the suite's images under the names it expects (built offline), and one
// node, either nodelet or, for comparison, the real kubelet built from the
// same pinned Kubernetes.
//
// StartCluster brings the cluster up, Run drives the ginkgo CLI over
// e2e.test with a focus and skip and reads the JUnit report back, and
// Selection holds what is run: the node and storage-volume [Conformance]
// specs minus the serial, disruptive, slow, flaky and feature-gated ones.
// The smoke test of this package runs a few of them in make test; make
// conformance (hack/conformance) runs all of them on both agents.
package conformance
