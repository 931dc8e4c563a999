package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nodelet/nodelet/test/utils"
)

// controlPlaneStatic is $CONTROL_PLANE's value that runs the control
// plane as static pods of nodelet, the way kubeadm lays one out, instead
// of processes of this program.
const controlPlaneStatic = "static"

// staticAPIServerTimeout bounds the wait for the API server that nodelet
// starts from its manifest.
const staticAPIServerTimeout = 4 * time.Minute

// staticControlPlane reads $CONTROL_PLANE: "static", or empty for the
// control plane as processes.
func staticControlPlane() (bool, error) {
	switch v := os.Getenv("CONTROL_PLANE"); v {
	case "", "processes":
		return false, nil
	case controlPlaneStatic:
		return true, nil
	default:
		return false, fmt.Errorf("CONTROL_PLANE=%q: want static or processes", v)
	}
}

// staticSteps bring up the control plane as static pods: nodelet starts
// first, with only a bootstrap kubeconfig, runs etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler from its manifest directory,
// and joins the API server it runs once the bootstrap token exists.
func (c *cluster) staticSteps() []clusterStep {
	return []clusterStep{
		{"building the images " + fmt.Sprint(images) + " (compiles the first time)", c.buildImages},
		{"building nodelet", c.buildNodelet},
		{"starting a private containerd and importing the images", c.startContainerd},
		{"building and importing the control-plane images", c.importControlPlaneImages},
		{"writing the PKI, kubeconfigs and static pod manifests of the control plane", c.writeStaticControlPlane},
		{"starting nodelet with the manifests and only a bootstrap kubeconfig, as node " + c.nodeName, c.startStaticNodelet},
		{"waiting for the API server that nodelet runs", c.waitStaticAPIServer},
		{"creating the bootstrap token and kubeadm's TLS bootstrap bindings", c.createStaticBootstrapToken},
		{"waiting for node " + c.nodeName + " to be Ready", c.waitNodeReady},
	}
}

func (c *cluster) importControlPlaneImages(ctx context.Context) error {
	_, err := c.ctrd.ImportControlPlaneImages(ctx, c.assets)
	return err
}

func (c *cluster) writeStaticControlPlane(_ context.Context) error {
	dir, err := os.MkdirTemp("", "nodelet-static-control-plane-")
	if err != nil {
		return fmt.Errorf("creating the control plane's directory: %w", err)
	}
	if err := c.st.addDirs(dir); err != nil {
		return errors.Join(err, os.RemoveAll(dir))
	}
	nodeIP, err := c.ctrd.HostIP()
	if err != nil {
		return err
	}
	cp, err := utils.NewStaticControlPlane(dir, utils.StaticControlPlaneOptions{NodeName: c.nodeName, AdvertiseAddress: nodeIP})
	if err != nil {
		return err
	}
	c.static = cp
	data, err := os.ReadFile(cp.AdminKubeconfig)
	if err != nil {
		return fmt.Errorf("reading the admin kubeconfig: %w", err)
	}
	if err := os.WriteFile(c.st.kubeconfig(), data, 0o600); err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	return nil
}

func (c *cluster) startStaticNodelet(ctx context.Context) error {
	n, err := c.static.StartStaticControlPlaneNodelet(ctx, c.ctrd, nil)
	return c.recordNodelet(n, err)
}

func (c *cluster) waitStaticAPIServer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, staticAPIServerTimeout)
	defer cancel()
	for {
		err := c.static.Ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the API server: %w; nodelet log:\n%s", err, c.nodelet.LogTail(30))
		case <-time.After(time.Second):
		}
	}
}

func (c *cluster) createStaticBootstrapToken(ctx context.Context) error {
	return c.static.CreateBootstrapToken(ctx, 24*time.Hour)
}
