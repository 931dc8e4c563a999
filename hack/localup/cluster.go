package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/test/utils"
)

// images are built on this machine and imported into the cluster's
// containerd: the sandbox image, busybox (the demo) and the web server
// (kubectl create deployment).
var images = []string{utils.PauseImage, utils.BusyboxImage, utils.WebImage}

// nodeReadyTimeout bounds the wait for the joined node to be Ready.
const nodeReadyTimeout = 2 * time.Minute

// cluster is what a run started, stopped in the reverse order.
type cluster struct {
	st       *stateDir
	assets   string
	nodeName string
	// nodes is the number of nodes; more than one runs multi.
	nodes   int
	multi   *utils.Cluster
	ctrd    *utils.Containerd
	api     *utils.APIServer
	kcm     *utils.Component
	sched   *utils.Component
	nodelet *utils.Nodelet
	// static is the control plane nodelet runs as static pods, when
	// $CONTROL_PLANE is static; api, kcm and sched are nil then.
	static *utils.StaticControlPlane
}

// clusterStep is one step of start.
type clusterStep struct {
	what string
	fn   func(context.Context) error
}

// start brings the cluster up step by step, recording each part in the
// state directory as soon as it exists.
func (c *cluster) start(ctx context.Context) error {
	static, err := staticControlPlane()
	if err != nil {
		return err
	}
	steps := []clusterStep{
		{"building the images " + fmt.Sprint(images) + " (compiles the first time)", c.buildImages},
		{"building nodelet", c.buildNodelet},
		{"starting a private containerd and importing the images", c.startContainerd},
		{"starting etcd and kube-apiserver (Node,RBAC; NodeRestriction, ServiceAccount; bootstrap tokens)", c.startAPIServer},
		{"starting kube-controller-manager and kube-scheduler", c.startControllers},
		{"starting nodelet, joining by TLS bootstrap as node " + c.nodeName, c.startNodelet},
		{"waiting for node " + c.nodeName + " to be Ready", c.waitNodeReady},
	}
	switch {
	case static && c.nodes > 1:
		return errors.New("CONTROL_PLANE=static runs one node: unset NODES or set it to 1")
	case static:
		steps = c.staticSteps()
	case c.nodes > 1:
		steps = c.multiNodeSteps()
	}
	for _, s := range steps {
		if err := timed(s.what, func() error { return s.fn(ctx) }); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) buildImages(ctx context.Context) error {
	for _, image := range images {
		if _, err := utils.ImageArchive(ctx, image); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) buildNodelet(ctx context.Context) error {
	_, err := utils.NodeletBinary(ctx)
	return err
}

func (c *cluster) startContainerd(ctx context.Context) error {
	ctrd, err := utils.StartContainerd(ctx, utils.ContainerdOptions{Images: images})
	if ctrd != nil {
		// Recorded even when the start failed: its directory may hold mounts.
		c.ctrd = ctrd
		if rerr := c.st.record(func(s *state) {
			s.Containerd = &containerdState{Dir: ctrd.Dir, Bridge: ctrd.Bridge}
		}); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	return err
}

func (c *cluster) startAPIServer(ctx context.Context) error {
	api, err := utils.StartAPIServerWithOptions(ctx, utils.APIServerOptions{
		BootstrapTokenAuth:      true,
		ServiceAccountAdmission: true,
	})
	if err != nil {
		return err
	}
	c.api = api
	if err := c.st.addDirs(api.Dirs()...); err != nil {
		return err
	}
	return utils.WriteKubeconfig(c.st.kubeconfig(), api.Config, "admin")
}

func (c *cluster) startControllers(ctx context.Context) error {
	kcm, err := utils.StartControllerManager(ctx, c.api, utils.ControllerManagerOptions{})
	if err != nil {
		return err
	}
	c.kcm = kcm
	if err := c.st.addDirs(kcm.Dir); err != nil {
		return err
	}
	sched, err := utils.StartScheduler(ctx, c.api)
	if err != nil {
		return err
	}
	c.sched = sched
	return c.st.addDirs(sched.Dir)
}

// startNodelet creates a bootstrap token and the bindings of TLS bootstrap
// and starts nodelet with only the token: it asks for its client
// certificate with a CSR that the controller-manager approves and signs.
func (c *cluster) startNodelet(ctx context.Context) error {
	token, err := c.api.SetUpTLSBootstrap(ctx)
	if err != nil {
		return err
	}
	n, err := utils.StartNodelet(ctx, utils.NodeletOptions{
		NodeName:            c.nodeName,
		API:                 c.api,
		Containerd:          c.ctrd,
		BootstrapKubeconfig: token.Kubeconfig,
	})
	return c.recordNodelet(n, err)
}

// recordNodelet records a started nodelet's directory and cgroup root.
func (c *cluster) recordNodelet(n *utils.Nodelet, err error) error {
	if n != nil {
		c.nodelet = n
		if rerr := c.st.addDirs(n.Dir); rerr != nil {
			return errors.Join(err, rerr)
		}
		if rerr := c.st.record(func(st *state) { st.Cgroups = append(st.Cgroups, n.CgroupRoot) }); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	return err
}

func (c *cluster) waitNodeReady(ctx context.Context) error {
	var admin client.Client
	var err error
	if c.static != nil {
		admin, err = c.static.AdminClient()
	} else {
		admin, err = c.api.AdminClient()
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, nodeReadyTimeout)
	defer cancel()
	node := &corev1.Node{}
	for {
		if err := admin.Get(ctx, client.ObjectKey{Name: c.nodeName}, node); err == nil && utils.NodeReady(node) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for node %s to be Ready: %w; %s", c.nodeName, ctx.Err(), c.nodeletLogs(30))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stop stops what was started, nodelet first and containerd last (it
// removes the pods' sandboxes), and forgets the state when all went well.
func (c *cluster) stop() error {
	errs := []error{c.stopMultiNode()}
	if c.nodelet != nil {
		errs = append(errs, c.nodelet.Cleanup())
	}
	for _, comp := range []*utils.Component{c.sched, c.kcm} {
		if comp != nil {
			errs = append(errs, comp.Stop())
		}
	}
	if c.api != nil {
		errs = append(errs, c.api.Stop())
	}
	if c.ctrd != nil {
		errs = append(errs, c.ctrd.Stop())
	}
	if c.static != nil {
		// After containerd: its containers mounted the directory.
		errs = append(errs, os.RemoveAll(c.static.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping the local cluster (make run-down cleans up what is left): %w", err)
	}
	return c.st.forget()
}

// defaultNodeName is the node's name: the host's, as a kubelet's.
func defaultNodeName() string { return v1alpha1.DefaultNodeName() }
