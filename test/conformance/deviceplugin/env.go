package deviceplugin

import (
	"encoding/json"
	"fmt"
	"os"
)

// Environment is what the specs know of the one-node cluster they run on,
// written by the harness as JSON and named by the specs' -environment flag.
type Environment struct {
	// Kubeconfig is the cluster admin's kubeconfig.
	Kubeconfig string `json:"kubeconfig"`
	// NodeName is the node's name.
	NodeName string `json:"nodeName"`
	// Agent names the node agent (nodelet or kubelet), for messages.
	Agent string `json:"agent"`
	// RootDir is the agent's root directory: the pod resources API's
	// socket is in RootDir/pod-resources.
	RootDir string `json:"rootDir"`
	// DevicePluginDir is where the agent serves the device plugin
	// registration (kubelet.sock) and looks for the plugins' sockets:
	// RootDir/device-plugins for nodelet; the kubelet's is compiled in,
	// /var/lib/kubelet/device-plugins whatever its root directory.
	DevicePluginDir string `json:"devicePluginDir"`
	// CDISpecDir is a directory of CDI specs the node's runtime reads,
	// which the sample device plugin's pod mounts as /var/run/cdi.
	CDISpecDir string `json:"cdiSpecDir"`
	// RuntimeEndpoint is the node's CRI endpoint (unix://...).
	RuntimeEndpoint string `json:"runtimeEndpoint"`
	// AgentControl is the base URL of the harness's agent control: POST
	// <AgentControl>/stop stops the agent, /start starts it again and
	// returns once it is healthy, /restart does both.
	AgentControl string `json:"agentControl"`
	// AgentHealthz is the agent's health URL.
	AgentHealthz string `json:"agentHealthz"`
}

// Write writes e to path.
func (e Environment) Write(path string) error {
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the device plugin specs' environment: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing the device plugin specs' environment: %w", err)
	}
	return nil
}

// ReadEnvironment reads an Environment that Write wrote.
func ReadEnvironment(path string) (Environment, error) {
	var e Environment
	data, err := os.ReadFile(path)
	if err != nil {
		return e, fmt.Errorf("reading the device plugin specs' environment: %w", err)
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return e, fmt.Errorf("parsing the device plugin specs' environment %s: %w", path, err)
	}
	return e, nil
}
