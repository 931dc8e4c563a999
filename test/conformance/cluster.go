package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/utils"
)

// Agent names the node agent of a cluster.
type Agent string

const (
	// AgentNodelet is nodelet built from this repository.
	AgentNodelet Agent = "nodelet"
	// AgentKubelet is the real kubelet of the pinned Kubernetes.
	AgentKubelet Agent = "kubelet"
)

// ClusterOptions describe a cluster.
type ClusterOptions struct {
	Agent Agent
	// NodeName is the one node's name.
	NodeName string
	// BinDir holds the conformance binaries (kubelet for AgentKubelet).
	BinDir string
	// Images are the e2e images' archives (ImageArchives), imported into
	// the node's containerd.
	Images map[string]string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Cluster is an API server, controller-manager and scheduler, and one node
// running Agent against a private containerd.
type Cluster struct {
	Options           ClusterOptions
	API               *utils.APIServer
	ControllerManager *utils.Component
	Scheduler         *utils.Component
	Containerd        *utils.Containerd
	// Registry serves the MirroredImages to Containerd.
	Registry *utils.Registry
	Nodelet  *utils.Nodelet
	Kubelet  *utils.Kubelet
	// Kubeconfig is the admin's kubeconfig, for e2e.test.
	Kubeconfig string
}

// KubeletPort is the port of the node API, the kubelet's default. The
// framework reaches nodes/<name>:10250/proxy/... without reading the
// Node's daemon endpoint, and the port is free: the node's address is the
// host's on the cluster's own pod bridge.
const KubeletPort = 10250

// clusterReadyTimeout bounds the wait for the node to be Ready and
// schedulable and for the default service account.
const clusterReadyTimeout = 3 * time.Minute

// StartCluster starts everything and waits until the node is Ready without
// a NoSchedule taint and the default namespace has its service account, the
// state the e2e framework checks before its first spec. On error what was
// started is stopped again.
func StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	c := &Cluster{Options: opts}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	steps := []struct {
		what string
		run  func(context.Context) error
	}{
		{"API server", c.startAPIServer},
		{"controller-manager and scheduler", c.startControlPlane},
		{"containerd", c.startContainerd},
		{string(opts.Agent), c.startNode},
		{"node ready", c.waitReady},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.run(ctx); err != nil {
			return nil, fmt.Errorf("starting the cluster: %s: %w", s.what, err)
		}
		fmt.Fprintf(opts.Log, "cluster: %s up in %s\n", s.what, time.Since(start).Round(100*time.Millisecond))
	}
	return c, nil
}

// startAPIServer starts the API server and turns on the ServiceAccount
// admission plugin, which envtest disables (so pods get their token volume
// and the suite's service account checks see a real cluster): the flag is
// dropped and the server restarted on the same port and certificates.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	api, err := utils.StartAPIServer(ctx)
	if err != nil {
		return err
	}
	c.API = api
	api.Env.ControlPlane.APIServer.Configure().Disable("disable-admission-plugins")
	if err := api.Restart(func() {}); err != nil {
		return fmt.Errorf("enabling ServiceAccount admission: %w", err)
	}
	if c.Kubeconfig, err = api.AdminKubeconfig(); err != nil {
		return err
	}
	return nil
}

func (c *Cluster) startControlPlane(ctx context.Context) error {
	cm, err := utils.StartControllerManager(ctx, c.API, utils.ControllerManagerOptions{})
	if err != nil {
		return err
	}
	c.ControllerManager = cm
	sched, err := utils.StartScheduler(ctx, c.API)
	if err != nil {
		return err
	}
	c.Scheduler = sched
	return nil
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	cd, err := utils.StartContainerd(ctx, utils.ContainerdOptions{})
	if err != nil {
		return err
	}
	c.Containerd = cd
	if err := ImportImages(ctx, cd, c.Options.Images); err != nil {
		return err
	}
	if c.Registry, err = StartMirror(ctx, c.Options.Images); err != nil {
		return err
	}
	return cd.AddMirror(mirroredRegistry, c.Registry.Host())
}

func (c *Cluster) startNode(ctx context.Context) error {
	switch c.Options.Agent {
	case AgentNodelet:
		n, err := utils.StartNodelet(ctx, utils.NodeletOptions{
			NodeName:   c.Options.NodeName,
			API:        c.API,
			Containerd: c.Containerd,
			Config:     map[string]any{"server": map[string]any{"port": KubeletPort}},
		})
		c.Nodelet = n
		return err
	case AgentKubelet:
		k, err := StartKubelet(ctx, utils.KubeletOptions{
			Binary:     c.Options.BinDir + "/" + KubeletBinary,
			NodeName:   c.Options.NodeName,
			API:        c.API,
			Containerd: c.Containerd,
		})
		c.Kubelet = k
		return err
	default:
		return fmt.Errorf("unknown node agent %q (want %s or %s)", c.Options.Agent, AgentNodelet, AgentKubelet)
	}
}

// waitReady waits for the node to be Ready with no NoSchedule taint (the
// node lifecycle controller lifts not-ready) and for default/default.
func (c *Cluster) waitReady(ctx context.Context) error {
	cl, err := c.API.AdminClient()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(clusterReadyTimeout)
	var last string
	for time.Now().Before(deadline) {
		if last = c.notReadyReason(ctx, cl); last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("cluster not ready after %s: %s", clusterReadyTimeout, last)
}

// notReadyReason says what is still missing, or "" when nothing is.
func (c *Cluster) notReadyReason(ctx context.Context, cl client.Client) string {
	var node corev1.Node
	if err := cl.Get(ctx, client.ObjectKey{Name: c.Options.NodeName}, &node); err != nil {
		return "node: " + err.Error()
	}
	if !utils.NodeReady(&node) {
		return "node not Ready"
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return "node tainted " + t.Key
		}
	}
	return c.serviceAccountMissing(ctx, cl)
}

// serviceAccountMissing says why default/default is missing, or "".
func (c *Cluster) serviceAccountMissing(ctx context.Context, cl client.Client) string {
	var sa corev1.ServiceAccount
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &sa); err != nil {
		return "default service account: " + err.Error()
	}
	return ""
}

// AgentLog returns the path of the node agent's log.
func (c *Cluster) AgentLog() string {
	switch {
	case c.Nodelet != nil:
		return c.Nodelet.LogPath
	case c.Kubelet != nil:
		return c.Kubelet.LogPath
	}
	return ""
}

// Stop tears everything down, node first so that no agent restarts pods
// while containerd removes them, then containerd (every sandbox, the
// bridge, the mounts), the agent's directory, and the control plane.
// Safe to call on a partly started cluster.
func (c *Cluster) Stop() error {
	var errs []error
	if c.Kubelet != nil {
		c.Kubelet.Terminate()
	}
	if c.Nodelet != nil {
		errs = append(errs, c.Nodelet.Stop())
	}
	if c.Containerd != nil {
		errs = append(errs, c.Containerd.Stop())
	}
	if c.Registry != nil {
		errs = append(errs, c.Registry.Stop())
	}
	if c.Kubelet != nil {
		errs = append(errs, c.Kubelet.Stop())
	}
	if c.Nodelet != nil {
		errs = append(errs, c.Nodelet.Cleanup())
	}
	for _, comp := range []*utils.Component{c.Scheduler, c.ControllerManager} {
		if comp != nil {
			errs = append(errs, comp.Stop())
		}
	}
	if c.API != nil {
		errs = append(errs, c.API.Stop())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping the cluster: %w", err)
	}
	return nil
}
