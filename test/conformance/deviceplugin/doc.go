// Package deviceplugin holds our own ports of the device plugin and pod
// resources specs of Kubernetes' node e2e suite (test/e2e_node:
// device_plugin_test.go, podresources_test.go), which e2e.test does not
// contain. Each spec keeps the upstream name, steps and assertions; the
// node suite's host access (systemctl, the CRI, the pod resources socket,
// /var/lib/kubelet) is replaced by what the harness hands over in an
// Environment: the cluster's kubeconfig, the node agent's root directory
// and runtime endpoint, and an AgentControl endpoint that stops and starts
// the agent, which the harness owns.
//
// The specs run only when the harness (hack/conformance -suite
// deviceplugin, or the conformance smoke test) passes -environment: under
// a plain go test they skip.
package deviceplugin
