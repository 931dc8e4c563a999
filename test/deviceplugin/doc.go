// Package deviceplugin is a stand-in device plugin for tests: it serves the
// device plugin API (v1beta1) on a socket in a node agent's device plugins
// directory, advertises a fixed set of devices, registers with the agent's
// kubelet.sock (or through its plugin watcher, with RegistryDir), and answers Allocate with an environment variable naming
// the devices (DEVICE_ID=<ids>). It runs in the test's process.
package deviceplugin
