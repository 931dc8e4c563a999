package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// ValidatePlugin, RegisterPlugin and DeRegisterPlugin take device plugins
// that register through the plugin watcher on <rootDir>/plugins_registry
// (type DevicePlugin) instead of the Registration API, as the kubelet's
// device manager does: the registration names the resource, announces the
// API versions and gives the plugin's socket as an absolute path; its
// options are asked with GetDevicePluginOptions.

// ValidatePlugin checks a plugin watcher registration: v1beta1 among its
// versions, an extended resource name, an absolute endpoint.
func (m *Manager) ValidatePlugin(name, endpoint string, versions []string) error {
	if !slices.Contains(versions, pluginapi.Version) {
		return fmt.Errorf("device plugin %s supports API versions %q, nodelet supports %q", name, versions, pluginapi.Version)
	}
	if !IsExtendedResource(name) {
		return fmt.Errorf("invalid resource name %q of device plugin at %s: not an extended resource name", name, endpoint)
	}
	if !filepath.IsAbs(endpoint) {
		return fmt.Errorf("endpoint %q of device plugin %s is not an absolute path", endpoint, name)
	}
	return nil
}

// RegisterPlugin asks the plugin for its options and, once it answered,
// watches its devices as a plugin registered through the Registration API
// (replacing the resource's earlier plugin). It fails, for the watcher to
// try again, until the manager has started or when the plugin does not
// answer.
func (m *Manager) RegisterPlugin(name, endpoint string, versions []string) error {
	if err := m.ValidatePlugin(name, endpoint, versions); err != nil {
		return err
	}
	m.mu.Lock()
	ctx := m.running
	m.mu.Unlock()
	if ctx == nil {
		return errors.New("the device plugin manager has not started")
	}
	opts, err := m.pluginOptions(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("asking device plugin %s at %s for its options: %w", name, endpoint, err)
	}
	m.opts.Logger.Info("Registering device plugin", "resource", name, "endpoint", endpoint, "through", "plugins_registry")
	go m.connect(ctx, name, endpoint, opts)
	return nil
}

// pluginOptions calls GetDevicePluginOptions on the plugin at socket.
func (m *Manager) pluginOptions(ctx context.Context, socket string) (*pluginapi.DevicePluginOptions, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	defer cancel()
	return pluginapi.NewDevicePluginClient(conn).GetDevicePluginOptions(ctx, &pluginapi.Empty{})
}

// DeRegisterPlugin stops watching the resource's plugin when it is the
// one at endpoint: its devices turn unhealthy and the resource goes after
// the grace period unless a plugin registers it again.
func (m *Manager) DeRegisterPlugin(name, endpoint string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ep := m.resources[name]; ep != nil && ep.socket == endpoint && ep.cancel != nil {
		// The stream's end stops the endpoint (stop).
		ep.cancel()
	}
}
