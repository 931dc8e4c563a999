package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Defaults of the plugin watcher.
const (
	// DefaultRetryPeriod is how often registration is tried again while a
	// socket exists and was not registered, as the kubelet's reconciler.
	DefaultRetryPeriod = time.Second
	// DefaultCallTimeout bounds each registration call on a plugin socket.
	DefaultCallTimeout = 10 * time.Second
	// DefaultNodeGetInfoTimeout bounds a driver's NodeGetInfo call.
	DefaultNodeGetInfoTimeout = 2 * time.Minute
)

// PluginsRegistryDir is the directory, under the root directory, where
// plugins put their registration sockets.
const PluginsRegistryDir = "plugins_registry"

// DriverInstaller takes what registered drivers reported about the node;
// *NodeInfo writes it to the API.
type DriverInstaller interface {
	InstallDriver(name string, info DriverNodeInfo)
	UninstallDriver(name string)
}

// PluginHandler takes the registrations of one plugin type other than CSI
// (dra.Drivers for DRAPlugin), as the kubelet's plugin handlers do.
type PluginHandler interface {
	// ValidatePlugin checks a registration before it is accepted.
	ValidatePlugin(name, endpoint string, versions []string) error
	// RegisterPlugin registers a validated plugin.
	RegisterPlugin(name, endpoint string, versions []string) error
	// DeRegisterPlugin removes a plugin whose registration socket went.
	DeRegisterPlugin(name, endpoint string)
}

// WatcherOptions configure a Watcher.
type WatcherOptions struct {
	// Dir is watched for registration sockets; created 0750 if missing.
	Dir string
	// Registry receives the registered drivers.
	Registry *Registry
	// Handlers take the registrations of other plugin types, by type
	// (registerapi.DRAPlugin); a type without one is refused.
	Handlers map[string]PluginHandler
	// Installer receives what the drivers report; nil drops it.
	Installer DriverInstaller
	// RetryPeriod, CallTimeout and NodeGetInfoTimeout default to the
	// Default* constants.
	RetryPeriod        time.Duration
	CallTimeout        time.Duration
	NodeGetInfoTimeout time.Duration
}

// Watcher is the kubelet's plugin registration on a directory: every unix
// socket in Dir (and its subdirectories; names starting with "." are
// ignored) is a plugin's registration service, which it asks for its
// plugin's type, name, endpoint and versions, registers, and answers with
// the outcome. CSI plugins are registered in the Registry, the types of
// Handlers by their handler; other plugin types are refused. A socket that goes away deregisters its plugin; a
// socket created again is registered again. A socket whose registration
// failed before the plugin was accepted is tried again every RetryPeriod
// while it exists; with every plugin registered, nothing runs until a
// socket comes or goes.
type Watcher struct {
	opts WatcherOptions

	mu sync.Mutex
	// desired are the sockets present, with when each was (re)created.
	desired map[string]time.Time
	// actual are the sockets whose plugin was accepted.
	actual map[string]plugin
	// busy are the sockets with a registration under way.
	busy map[string]bool
	// failed is the last error of each socket whose registration is being
	// retried: a repeat of the same error is logged at V(1) only.
	failed map[string]string
	kick   chan struct{}
}

// plugin is an accepted registration socket.
type plugin struct {
	created time.Time
	name    string
	// typ and endpoint are the plugin's type and endpoint.
	typ, endpoint string
}

// NewWatcher returns a watcher with opts.
func NewWatcher(opts WatcherOptions) *Watcher {
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.NodeGetInfoTimeout <= 0 {
		opts.NodeGetInfoTimeout = DefaultNodeGetInfoTimeout
	}
	return &Watcher{
		opts:    opts,
		desired: map[string]time.Time{},
		actual:  map[string]plugin{},
		busy:    map[string]bool{},
		failed:  map[string]string{},
		kick:    make(chan struct{}, 1),
	}
}

// Start watches until ctx ends. It fails if the directory cannot be made
// or watched.
func (w *Watcher) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("pluginwatcher").WithValues("dir", w.opts.Dir)
	ctx = log.IntoContext(ctx, logger)
	if err := os.MkdirAll(w.opts.Dir, 0o750); err != nil {
		return fmt.Errorf("creating plugin registration directory %s: %w", w.opts.Dir, err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("creating watcher of %s: %w", w.opts.Dir, err)
	}
	defer func() { _ = fw.Close() }()
	if err := w.walk(fw, w.opts.Dir); err != nil {
		return err
	}
	logger.Info("Watching for plugin registration sockets")

	var wg sync.WaitGroup
	defer wg.Wait()
	// The ticker runs only while a socket's plugin is not registered (a
	// registration under way, or failed and retried): an idle agent is not
	// woken every second for nothing.
	ticker := time.NewTicker(w.opts.RetryPeriod)
	defer ticker.Stop()
	retrying := true
	w.reconcile(ctx, &wg)
	for {
		if unsettled := w.unsettled(); unsettled != retrying {
			retrying = unsettled
			if retrying {
				ticker.Reset(w.opts.RetryPeriod)
			} else {
				ticker.Stop()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("plugin registration directory watch closed")
			}
			w.handle(ctx, fw, ev)
			w.reconcile(ctx, &wg)
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("plugin registration directory watch closed")
			}
			logger.Error(err, "Plugin registration directory watch failed")
		case <-w.kick:
			w.reconcile(ctx, &wg)
		case <-ticker.C:
			w.reconcile(ctx, &wg)
		}
	}
}

// unsettled reports whether a socket's plugin is not registered yet.
func (w *Watcher) unsettled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for path := range w.desired {
		if _, ok := w.actual[path]; !ok {
			return true
		}
	}
	return false
}

// walk watches dir and its subdirectories and adds the sockets in them.
func (w *Watcher) walk(fw *fsnotify.Watcher, dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return fmt.Errorf("reading plugin registration directory %s: %w", dir, err)
			}
			return nil // gone meanwhile
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if err := fw.Add(path); err != nil {
				return fmt.Errorf("watching %s: %w", path, err)
			}
			return nil
		}
		if d.Type()&fs.ModeSocket != 0 {
			w.addSocket(path)
		}
		return nil
	})
}

// handle applies one watch event to the desired sockets.
func (w *Watcher) handle(ctx context.Context, fw *fsnotify.Watcher, ev fsnotify.Event) {
	if strings.HasPrefix(filepath.Base(ev.Name), ".") {
		return
	}
	if ev.Has(fsnotify.Create) {
		fi, err := os.Lstat(ev.Name)
		if err != nil {
			return // gone meanwhile; its removal event follows
		}
		switch {
		case fi.IsDir():
			if err := w.walk(fw, ev.Name); err != nil {
				log.FromContext(ctx).Error(err, "Failed to watch plugin registration subdirectory", "path", ev.Name)
			}
		case fi.Mode()&fs.ModeSocket != 0:
			w.addSocket(ev.Name)
		}
		return
	}
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		w.mu.Lock()
		for p := range w.desired {
			if p == ev.Name || strings.HasPrefix(p, ev.Name+string(filepath.Separator)) {
				delete(w.desired, p)
			}
		}
		w.mu.Unlock()
	}
}

func (w *Watcher) addSocket(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.desired[path] = time.Now()
}

// reconcile deregisters the plugins whose socket is gone or was created
// again, and starts the registration of every socket not registered.
func (w *Watcher) reconcile(ctx context.Context, wg *sync.WaitGroup) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for path, p := range w.actual {
		if w.busy[path] {
			continue
		}
		if created, ok := w.desired[path]; ok && created.Equal(p.created) {
			continue
		}
		delete(w.actual, path)
		w.deregister(ctx, path, p)
	}
	for path := range w.failed {
		if _, ok := w.desired[path]; !ok {
			delete(w.failed, path)
		}
	}
	for path, created := range w.desired {
		if _, ok := w.actual[path]; ok || w.busy[path] {
			continue
		}
		w.busy[path] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, accepted, err := w.register(ctx, path)
			w.mu.Lock()
			delete(w.busy, path)
			if accepted {
				p.created = created
				w.actual[path] = p
			}
			last, retried := w.failed[path]
			repeated := err != nil && retried && last == err.Error()
			// A socket is often seen before its server listens: the
			// first attempt failing so is not an error yet.
			early := err != nil && !retried && status.Code(errors.Unwrap(err)) == codes.Unavailable
			switch {
			case err != nil && !accepted && early:
				w.failed[path] = ""
			case err != nil && !accepted:
				w.failed[path] = err.Error()
			default:
				delete(w.failed, path)
			}
			w.mu.Unlock()
			switch {
			case err == nil || ctx.Err() != nil:
			case repeated || early:
				log.FromContext(ctx).V(1).Info("Failed to register plugin, will retry", "socket", path, "err", err.Error())
			default:
				log.FromContext(ctx).Error(err, "Failed to register plugin", "socket", path)
			}
			if accepted {
				// A removal seen during the registration is acted on now.
				select {
				case w.kick <- struct{}{}:
				default:
				}
			}
		}()
	}
}

// deregister removes the plugin registered from the socket at path.
func (w *Watcher) deregister(ctx context.Context, path string, p plugin) {
	if h := w.opts.Handlers[p.typ]; p.typ != registerapi.CSIPlugin && h != nil {
		h.DeRegisterPlugin(p.name, p.endpoint)
		return
	}
	name := p.name
	if !w.opts.Registry.remove(name, path) {
		return
	}
	if w.opts.Installer != nil {
		w.opts.Installer.UninstallDriver(name)
	}
	log.FromContext(ctx).Info("Deregistered CSI driver", "driver", name, "socket", path)
}

// register runs one registration of the plugin at path. accepted says the
// plugin passed validation (it is then not tried again until its socket is
// created again, even when registering it failed, as with the kubelet).
func (w *Watcher) register(ctx context.Context, path string) (p plugin, accepted bool, err error) {
	conn, err := dialEndpoint(path)
	if err != nil {
		return plugin{}, false, fmt.Errorf("RegisterPlugin error -- dial failed at socket %s, err: %w", path, err)
	}
	defer func() { _ = conn.Close() }()
	client := registerapi.NewRegistrationClient(conn)

	callCtx, cancel := context.WithTimeout(ctx, w.opts.CallTimeout)
	info, err := client.GetInfo(callCtx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return plugin{}, false, fmt.Errorf("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket %s, err: %w", path, err)
	}
	logger := log.FromContext(ctx).WithValues("socket", path, "type", info.Type, "plugin", info.Name)
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = path
	}
	p = plugin{name: info.Name, typ: info.Type, endpoint: endpoint}
	// refuse tells the plugin it was not accepted.
	refuse := func(msg string) (plugin, bool, error) {
		if err := w.notify(ctx, client, false, msg); err != nil {
			return plugin{}, false, err
		}
		return plugin{}, false, errors.New(msg)
	}

	if h := w.opts.Handlers[info.Type]; info.Type != registerapi.CSIPlugin && h != nil {
		if err := h.ValidatePlugin(info.Name, endpoint, info.SupportedVersions); err != nil {
			return refuse(fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: %v", err))
		}
		if err := h.RegisterPlugin(info.Name, endpoint, info.SupportedVersions); err != nil {
			msg := fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: %v", err)
			return p, true, errors.Join(errors.New(msg), w.notify(ctx, client, false, msg))
		}
		return p, true, w.notify(ctx, client, true, "")
	}
	if info.Type != registerapi.CSIPlugin {
		return refuse(fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s (nodelet registers %s plugins only)",
			info.Type, path, strings.Join(w.types(), ", ")))
	}
	highest, err := w.opts.Registry.validate(info.Name, endpoint, path, info.SupportedVersions)
	if err != nil {
		return refuse(fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: %v", err))
	}

	if err := w.install(ctx, logger, RegisteredDriver{
		Name: info.Name, Endpoint: endpoint, Versions: info.SupportedVersions, Socket: path,
	}, highest); err != nil {
		msg := fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: %v", err)
		return p, true, errors.Join(errors.New(msg), w.notify(ctx, client, false, msg))
	}
	if err := w.notify(ctx, client, true, ""); err != nil {
		return p, true, err
	}
	return p, true, nil
}

// types are the plugin types the watcher registers, sorted.
func (w *Watcher) types() []string {
	out := []string{registerapi.CSIPlugin}
	for t, h := range w.opts.Handlers {
		if h != nil && t != registerapi.CSIPlugin {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// install registers the driver and asks its NodeGetInfo; on failure the
// driver is deregistered again.
func (w *Watcher) install(ctx context.Context, logger logr.Logger, d RegisteredDriver, highest *utilversion.Version) error {
	if err := w.opts.Registry.add(d, highest); err != nil {
		return err
	}
	info, err := w.nodeGetInfo(ctx, d.Name)
	if err == nil {
		err = validateTopology(info.Topology)
	}
	if err != nil {
		w.opts.Registry.remove(d.Name, d.Socket)
		return err
	}
	if w.opts.Installer != nil {
		w.opts.Installer.InstallDriver(d.Name, info)
	}
	logger.Info("Registered CSI driver", "endpoint", d.Endpoint, "version", highest.String(), "nodeID", info.NodeID)
	return nil
}

func (w *Watcher) nodeGetInfo(ctx context.Context, driver string) (DriverNodeInfo, error) {
	return nodeGetInfo(ctx, w.opts.Registry, driver, w.opts.NodeGetInfoTimeout)
}

// nodeGetInfo asks a registered driver's NodeGetInfo, within timeout.
func nodeGetInfo(ctx context.Context, drivers Drivers, driver string, timeout time.Duration) (DriverNodeInfo, error) {
	nc, err := drivers.NodeClient(ctx, driver)
	if err != nil {
		return DriverNodeInfo{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := nc.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
	if err != nil {
		return DriverNodeInfo{}, fmt.Errorf("calling NodeGetInfo of CSI driver %s: %w", driver, err)
	}
	if resp.GetNodeId() == "" {
		return DriverNodeInfo{}, fmt.Errorf("NodeGetInfo of CSI driver %s returned an empty node ID", driver)
	}
	return DriverNodeInfo{
		NodeID:     resp.GetNodeId(),
		MaxVolumes: resp.GetMaxVolumesPerNode(),
		Topology:   resp.GetAccessibleTopology().GetSegments(),
	}, nil
}

// notify tells the plugin the outcome of its registration.
func (w *Watcher) notify(ctx context.Context, client registerapi.RegistrationClient, registered bool, msg string) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.CallTimeout)
	defer cancel()
	_, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: registered, Error: msg})
	if err != nil {
		return fmt.Errorf("RegisterPlugin error -- failed to send registration status, err: %w", err)
	}
	return nil
}
