// Package e2e holds the end-to-end suite: specs that run against a real
// containerd (through the CRI) and a real kube-apiserver with the Node
// authorizer, both started by the test/utils harness. It needs root and
// runs with a plain `go test ./test/e2e/...`.
package e2e
