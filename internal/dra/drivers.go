package dra

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/util/workqueue"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	"github.com/nodelet/nodelet/internal/metrics"
)

// Defaults of the driver registry.
const (
	// DefaultCallTimeout bounds each call on a driver, as the kubelet's.
	DefaultCallTimeout = 45 * time.Second
	// DefaultWipeDelay is how long a driver may be away before its
	// ResourceSlices of this node are deleted, as the kubelet's: a
	// DaemonSet's rolling update brings it back sooner.
	DefaultWipeDelay = 30 * time.Second
	// maxWipeBackoff caps the retry period of a failed deletion.
	maxWipeBackoff = 5 * time.Minute
	// DefaultHealthRetry is the first wait before a driver's health
	// stream that ended is opened again; the wait doubles up to
	// maxHealthRetry, and starts over once a stream brought a report.
	DefaultHealthRetry = time.Second
	maxHealthRetry     = 30 * time.Second
)

// SupportedServices are the gRPC services of a DRA driver nodelet calls,
// as drivers name them in their registration's supported versions, the
// preferred first: a plugin that serves only v1beta1 is called through the
// library's conversion to and from v1.
var SupportedServices = []string{drapb.DRAPluginService, drapbv1beta1.DRAPluginService}

// HealthServices are the versions of the optional DRAResourceHealth
// service nodelet watches, the preferred first, as the kubelet's: v1alpha1
// through the library's conversion to v1.
var HealthServices = []string{drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService}

// HealthReceiver takes what the drivers' health streams say (Health
// implements it).
type HealthReceiver interface {
	// Report is one NodeWatchResources answer of the driver.
	Report(driver string, devices []*drahealthv1.DeviceHealth)
	// Forget is told when the driver's last health stream ended.
	Forget(driver string)
}

// SliceCleaner deletes this node's ResourceSlices.
type SliceCleaner interface {
	// DriversWithSlices lists the drivers that publish ResourceSlices for
	// this node.
	DriversWithSlices(ctx context.Context) ([]string, error)
	// DeleteSlices deletes this node's ResourceSlices of the driver.
	DeleteSlices(ctx context.Context, driver string) error
}

// DriversOptions configure a Drivers registry.
type DriversOptions struct {
	// Slices, when set, deletes the ResourceSlices of drivers gone from
	// the node (Start runs it); nil deletes none.
	Slices SliceCleaner
	// WipeDelay and CallTimeout default to DefaultWipeDelay and
	// DefaultCallTimeout.
	WipeDelay   time.Duration
	CallTimeout time.Duration
	// Health, when set, gets the device health reports of the plugins
	// that announce a DRAResourceHealth service (HealthServices): each
	// such plugin's NodeWatchResources stream is opened when it
	// registers, opened again with back-off (HealthRetry, zero is
	// DefaultHealthRetry) when it ends, and closed when the plugin goes.
	// Nil watches none (the ResourceHealthStatus gate off).
	Health      HealthReceiver
	HealthRetry time.Duration
	Logger      logr.Logger
}

// Drivers is the registry of the DRA drivers registered on this node
// through the plugin watcher: each driver's plugins (one, or two during a
// rolling update, each on its own endpoint), newest last, and a client to
// the newest. When a driver's last plugin goes, its ResourceSlices of
// this node are deleted after WipeDelay unless it registers again; at
// start, the slices of every driver not registered are deleted, as the
// kubelet does (the node advertises no device nobody can prepare). It is
// safe for concurrent use.
type Drivers struct {
	opts DriversOptions

	mu      sync.Mutex
	plugins map[string][]*driverPlugin
	// wipes are the drivers whose slices are to be deleted, with when.
	wipes map[string]time.Time
	kick  chan struct{}
	// healthStreams counts the open health streams of each driver.
	healthStreams map[string]int
}

type driverPlugin struct {
	endpoint string
	// services are the gRPC services the plugin announced.
	services []string
	conn     *grpc.ClientConn
	// stopHealth ends the watch of its health stream; nil for none.
	stopHealth context.CancelFunc
}

// stop ends the plugin's health watch and closes its connection.
func (p *driverPlugin) stop() {
	if p.stopHealth != nil {
		p.stopHealth()
	}
	_ = p.conn.Close()
}

// NewDrivers returns an empty registry.
func NewDrivers(opts DriversOptions) *Drivers {
	if opts.WipeDelay <= 0 {
		opts.WipeDelay = DefaultWipeDelay
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.HealthRetry <= 0 {
		opts.HealthRetry = DefaultHealthRetry
	}
	return &Drivers{opts: opts, plugins: map[string][]*driverPlugin{}, wipes: map[string]time.Time{}, kick: make(chan struct{}, 1), healthStreams: map[string]int{}}
}

// ValidatePlugin checks a DRA driver's registration: a name, a service
// nodelet calls among those it announces, and an endpoint that is the
// absolute path of a unix socket.
func (d *Drivers) ValidatePlugin(name, endpoint string, services []string) error {
	if name == "" {
		return errors.New("DRA driver plugin at endpoint " + endpoint + " has no name")
	}
	if err := validateServices(services); err != nil {
		return fmt.Errorf("invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %w", name, endpoint, err)
	}
	if !filepath.IsAbs(endpoint) {
		return fmt.Errorf("endpoint %q of DRA driver plugin %s is not an absolute path", endpoint, name)
	}
	fi, err := os.Stat(endpoint)
	if err != nil {
		return fmt.Errorf("endpoint of DRA driver plugin %s: %w", name, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("endpoint %s of DRA driver plugin %s is not a socket", endpoint, name)
	}
	return nil
}

// validateServices requires a service nodelet calls.
func validateServices(services []string) error {
	if len(services) == 0 {
		return errors.New("empty list of supported gRPC services (aka supported versions)")
	}
	if pluginService(services) == "" {
		return fmt.Errorf("none of services supported by the plugin (%q) are supported by nodelet (%q)", services, SupportedServices)
	}
	return nil
}

// RegisterPlugin adds a validated plugin of the named driver, and watches
// its health stream when it has one (see DriversOptions.Health); a
// pending deletion of the driver's slices is called off.
func (d *Drivers) RegisterPlugin(name, endpoint string, services []string) error {
	if err := d.ValidatePlugin(name, endpoint, services); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if slices.ContainsFunc(d.plugins[name], func(p *driverPlugin) bool { return p.endpoint == endpoint }) {
		// One plugin instance cannot take over another's endpoint.
		return fmt.Errorf("endpoint %s already registered for DRA driver plugin %s", endpoint, name)
	}
	conn, err := dial(name, endpoint)
	if err != nil {
		return fmt.Errorf("create gRPC connection to DRA driver %s plugin at endpoint %s: %w", name, endpoint, err)
	}
	p := &driverPlugin{endpoint: endpoint, services: slices.Clone(services), conn: conn}
	healthService := pickHealthService(services)
	if d.opts.Health != nil && healthService != "" {
		ctx, cancel := context.WithCancel(context.Background())
		p.stopHealth = cancel
		go d.watchHealth(ctx, name, p, healthService)
	}
	d.plugins[name] = append(d.plugins[name], p)
	delete(d.wipes, name)
	d.opts.Logger.Info("Registered DRA driver", "driver", name, "endpoint", endpoint, "plugins", len(d.plugins[name]), "healthService", healthService)
	return nil
}

// DeRegisterPlugin removes a plugin; when it was the driver's last, the
// deletion of its slices is scheduled.
func (d *Drivers) DeRegisterPlugin(name, endpoint string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ps := d.plugins[name]
	i := slices.IndexFunc(ps, func(p *driverPlugin) bool { return p.endpoint == endpoint })
	if i < 0 {
		return
	}
	ps[i].stop()
	ps = slices.Delete(ps, i, i+1)
	if len(ps) == 0 {
		delete(d.plugins, name)
		if d.opts.Slices != nil {
			d.wipes[name] = time.Now().Add(d.opts.WipeDelay)
			d.wake()
		}
	} else {
		d.plugins[name] = ps
	}
	d.opts.Logger.Info("Deregistered DRA driver", "driver", name, "endpoint", endpoint, "plugins", len(ps))
}

// Client returns the named driver's service on its newest plugin, and
// the timeout of each call: the v1 service when the plugin announced it,
// else its v1beta1 service behind the conversion to v1. The error of a
// driver not registered is the kubelet's.
func (d *Drivers) Client(name string) (drapb.DRAPluginClient, time.Duration, error) {
	if name == "" {
		return nil, 0, errors.New("DRA driver name is empty")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ps := d.plugins[name]
	if len(ps) == 0 {
		return nil, 0, fmt.Errorf("DRA driver %s is not registered", name)
	}
	return ps[len(ps)-1].client(), d.opts.CallTimeout, nil
}

// client is the DRA service of the plugin, in the version it speaks that
// nodelet prefers (a validated plugin speaks one of them).
func (p *driverPlugin) client() drapb.DRAPluginClient {
	if pluginService(p.services) == drapbv1beta1.DRAPluginService {
		return drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(p.conn)}
	}
	return drapb.NewDRAPluginClient(p.conn)
}

// pluginService returns the DRA service nodelet calls among those a plugin
// announced: the first of SupportedServices it lists, "" for none.
func pluginService(announced []string) string {
	for _, s := range SupportedServices {
		if slices.Contains(announced, s) {
			return s
		}
	}
	return ""
}

// Names returns the registered drivers, sorted.
func (d *Drivers) Names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.plugins))
}

func (d *Drivers) registered(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.plugins[name]) > 0
}

func (d *Drivers) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Close ends the health watches and closes the connections to every
// plugin.
func (d *Drivers) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ps := range d.plugins {
		for _, p := range ps {
			p.stop()
		}
	}
	d.plugins = map[string][]*driverPlugin{}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (d *Drivers) NeedLeaderElection() bool { return false }

// Start deletes ResourceSlices until ctx ends: at once those of the
// drivers not registered, then those of each driver gone for WipeDelay.
// A failed deletion is retried with back-off (1 s doubling to 5 min). It
// needs the API server; without Slices it returns at once.
func (d *Drivers) Start(ctx context.Context) error {
	if d.opts.Slices == nil {
		return nil
	}
	log := d.opts.Logger
	// The back-off of each driver's deletion, and of the deletion of the
	// drivers not registered under startupKey (no driver's name).
	const startupKey = ""
	backoff := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, maxWipeBackoff)
	startup := true
	var startupAt time.Time
	for {
		now := time.Now()
		next := time.Hour
		if startup && !now.Before(startupAt) {
			if err := d.wipeUnregistered(ctx); err != nil {
				retryIn := backoff.When(startupKey)
				startupAt = now.Add(retryIn)
				log.V(1).Info("Deleting the ResourceSlices of drivers not registered failed, will retry", "err", err.Error(), "retryIn", retryIn)
			} else {
				startup = false
				backoff.Forget(startupKey)
			}
		}
		if startup {
			next = min(next, startupAt.Sub(now))
		}
		d.mu.Lock()
		due := map[string]time.Time{}
		for name, at := range d.wipes {
			due[name] = at
		}
		d.mu.Unlock()
		for name, at := range due {
			if at.After(now) {
				next = min(next, at.Sub(now))
				continue
			}
			err := d.opts.Slices.DeleteSlices(ctx, name)
			d.mu.Lock()
			if cur, ok := d.wipes[name]; ok && cur.Equal(at) {
				if err == nil {
					delete(d.wipes, name)
				} else {
					retryIn := backoff.When(name)
					d.wipes[name] = now.Add(retryIn)
					next = min(next, retryIn)
				}
			}
			d.mu.Unlock()
			if err == nil {
				backoff.Forget(name)
				log.Info("Deleted the ResourceSlices of a DRA driver gone from the node", "driver", name)
			} else if ctx.Err() == nil {
				log.V(1).Info("Deleting the ResourceSlices of a DRA driver failed, will retry", "driver", name, "err", err.Error())
			}
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-d.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// wipeUnregistered deletes the slices of the drivers not registered.
func (d *Drivers) wipeUnregistered(ctx context.Context) error {
	drivers, err := d.opts.Slices.DriversWithSlices(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range drivers {
		if d.registered(name) {
			continue
		}
		if err := d.opts.Slices.DeleteSlices(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		d.opts.Logger.Info("Deleted the ResourceSlices of a DRA driver not registered", "driver", name)
	}
	return errors.Join(errs...)
}

// pickHealthService returns the health service nodelet watches among
// those a plugin announced, "" for none.
func pickHealthService(announced []string) string {
	for _, s := range HealthServices {
		if slices.Contains(announced, s) {
			return s
		}
	}
	return ""
}

// watchHealth opens the plugin's health stream, and opens it again with
// back-off whenever it ends, until ctx ends (the plugin went) or the
// plugin turns out not to serve the service it announced.
func (d *Drivers) watchHealth(ctx context.Context, driver string, p *driverPlugin, service string) {
	log := d.opts.Logger.WithValues("driver", driver, "endpoint", p.endpoint, "healthService", service)
	retry := d.opts.HealthRetry
	for {
		received, err := d.streamHealth(ctx, driver, p.conn, service)
		if ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.Unimplemented {
			log.Info("DRA driver does not serve the health service it announced, not watching it", "err", err.Error())
			return
		}
		if received {
			retry = d.opts.HealthRetry
		}
		log.V(1).Info("DRA driver health stream ended, opening it again", "err", fmt.Sprint(err), "retryIn", retry)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retry = min(2*retry, maxHealthRetry)
	}
}

// streamHealth opens the plugin's NodeWatchResources stream and hands
// each answer to the health receiver until the stream ends; the driver's
// health is then forgotten unless another of its plugins' streams is
// open (a rolling update). received says whether an answer came.
func (d *Drivers) streamHealth(ctx context.Context, driver string, conn *grpc.ClientConn, service string) (received bool, err error) {
	stream, err := openHealthStream(ctx, conn, service)
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	d.healthStreams[driver]++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.healthStreams[driver]--
		last := d.healthStreams[driver] <= 0
		if last {
			delete(d.healthStreams, driver)
		}
		d.mu.Unlock()
		if last {
			d.opts.Health.Forget(driver)
		}
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return received, err
		}
		received = true
		d.opts.Health.Report(driver, resp.GetDevices())
	}
}

// openHealthStream opens the NodeWatchResources stream of the service's
// version, a v1alpha1 one converted to v1.
func openHealthStream(ctx context.Context, conn *grpc.ClientConn, service string) (drahealthv1.DRAResourceHealth_NodeWatchResourcesClient, error) {
	if service == drahealthv1alpha1.DRAResourceHealthService {
		return drahealthv1.V1Alpha1ClientWrapper{Client: drahealthv1alpha1.NewDRAResourceHealthClient(conn)}.NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	}
	return drahealthv1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
}

// dial makes a client connection to a unix socket; it connects at the
// first call.
func dial(driver, path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}),
		grpc.WithUnaryInterceptor(timed(driver)))
}

// timed records each call to the driver's plugin in
// dra_grpc_operations_duration_seconds, as the kubelet does.
func timed(driver string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		metrics.DRAGRPCOperationsDuration.WithLabelValues(driver, method, status.Code(err).String()).Observe(time.Since(start).Seconds())
		return err
	}
}
