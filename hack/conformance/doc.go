// Command conformance runs Kubernetes' e2e conformance specs (the
// selection of test/conformance) against nodelet and against the real
// kubelet, one after the other, each on a fresh cluster of the test
// harness, and prints both columns: passed and failed counts, the failed
// specs, and the specs the kubelet passes and nodelet fails.
//
//	go run ./hack/conformance                  # both agents (make conformance)
//	go run ./hack/conformance -node nodelet    # one agent (or NODE=nodelet)
//	go run ./hack/conformance -list            # print the selected specs
//
// Reports (JUnit, the suite's output, the agent's and containerd's logs) go
// to -out. Nothing keeps running afterwards: every process, mount and bridge
// of a cluster is checked to be gone.
package main
