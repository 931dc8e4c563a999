package controller

import (
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nodelet/nodelet/internal/deviceplugin"
	"github.com/nodelet/nodelet/internal/dra"
	"github.com/nodelet/nodelet/internal/executor"
	"github.com/nodelet/nodelet/internal/features"
	"github.com/nodelet/nodelet/internal/nodeinfo"
	"github.com/nodelet/nodelet/internal/podresources"
	"github.com/nodelet/nodelet/internal/podspec"
)

// devicesFor returns the device plugin manager the node and pod
// reconcilers share, made (and added to run before the API server
// answers) by the first of them set up. It serves registrations on
// <rootDir>/device-plugins/kubelet.sock and asks for a Node status write
// whenever the devices change, and, with the ResourceHealthStatus gate on,
// for a status write of the pods holding a device whose health changed.
func devicesFor(mgr ctrl.Manager, d *Deps) (*deviceplugin.Manager, error) {
	if d.devices != nil {
		return d.devices, nil
	}
	opts := deviceplugin.Options{
		Dir:      filepath.Join(d.Config.RootDir, deviceplugin.DirName),
		OnChange: kickNode(d),
		Logger:   mgr.GetLogger().WithName("deviceplugin"),
	}
	if features.Enabled(features.ResourceHealthStatus) {
		opts.OnHealthChange = resourceUpdatesFor(d, mgr.GetLogger().WithName("pod")).Pods
	}
	m, err := deviceplugin.New(opts)
	if err != nil {
		return nil, err
	}
	if err := d.local(mgr).Add(manager.RunnableFunc(m.Start)); err != nil {
		return nil, fmt.Errorf("adding the device plugin manager: %w", err)
	}
	d.devices = m
	return m, nil
}

// addDevices adds the device plugins' resources to an observation of the
// node.
func addDevices(obs *nodeinfo.Observation, devices func() (capacity, allocatable corev1.ResourceList, removed []corev1.ResourceName)) {
	capacity, allocatable, removed := devices()
	if obs.Capacity == nil {
		obs.Capacity = corev1.ResourceList{}
	}
	if obs.Allocatable == nil {
		obs.Allocatable = corev1.ResourceList{}
	}
	for name, q := range capacity {
		obs.Capacity[name] = q
	}
	for name, q := range allocatable {
		obs.Allocatable[name] = q
	}
	obs.RemovedResources = append(obs.RemovedResources, removed...)
}

// setupDevices gives the pods the device plugins' devices (allocated at
// admission, added to their containers' configs at start) and serves the
// pod resources API that reports them.
func setupDevices(mgr ctrl.Manager, d *Deps, admit *Admitter, exec *executor.Executor) error {
	devices, err := devicesFor(mgr, d)
	if err != nil {
		return err
	}
	admit.Devices = devices
	exec.Devices = devices
	srv := &podresources.Server{
		Dir:    filepath.Join(d.Config.RootDir, podresources.DirName),
		Source: podResourcesSource{Admitter: admit, Manager: devices, claims: claimsFor(mgr, d)},
		Logger: mgr.GetLogger().WithName("podresources"),
	}
	if err := d.local(mgr).Add(manager.RunnableFunc(srv.Start)); err != nil {
		return fmt.Errorf("adding the pod resources API: %w", err)
	}
	return nil
}

// podResourcesSource is what the pod resources API reports: the admitted
// pods and their devices.
type podResourcesSource struct {
	*Admitter
	*deviceplugin.Manager
	claims *dra.Manager
}

// Claims implements podresources.Source: the prepared claims the
// container uses, with their drivers' devices.
func (s podResourcesSource) Claims(pod *corev1.Pod, container string) []podresources.Claim {
	c := podspec.ContainerSpec(pod, container)
	if c == nil || s.claims == nil {
		return nil
	}
	var out []podresources.Claim
	for _, st := range s.claims.ContainerClaims(pod, c) {
		claim := podresources.Claim{Name: st.Name, Namespace: st.Namespace}
		for _, d := range st.Drivers {
			for _, dev := range d.Devices {
				claim.Devices = append(claim.Devices, podresources.ClaimDevice{Driver: d.Name, Pool: dev.Pool, Device: dev.Device, CDIDeviceIDs: dev.CDIDeviceIDs})
			}
		}
		out = append(out, claim)
	}
	return out
}
