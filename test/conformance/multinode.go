package conformance

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/nodelet/nodelet/test/utils"
)

// MultiNodeOptions describe a cluster of several nodes on one node network
// (utils.StartCluster) with kube-proxy and CoreDNS, every node running
// Agent.
type MultiNodeOptions struct {
	Agent Agent
	// Nodes is the number of nodes.
	Nodes int
	// BinDir holds the conformance binaries (kubelet for AgentKubelet).
	BinDir string
	// Images are the e2e images' archives (ImageArchives), imported into
	// every node's containerd.
	Images map[string]string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// MultiNodeCluster is a started multi-node cluster.
type MultiNodeCluster struct {
	*utils.Cluster
	// Kubeconfig is the admin's kubeconfig, for e2e.test.
	Kubeconfig string
}

// multiNodeReadyTimeout bounds the wait for the nodes and then for the
// add-ons: several agents start at once on a shared machine.
const multiNodeReadyTimeout = 5 * time.Minute

// StartMultiNodeCluster starts the nodes, imports the e2e images on every
// node, installs kube-proxy and CoreDNS and waits for them, and returns
// once the default namespace has its service account. On error what was
// started is stopped.
func StartMultiNodeCluster(ctx context.Context, opts MultiNodeOptions) (*MultiNodeCluster, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	copts := utils.ClusterOptions{
		Nodes:        opts.Nodes,
		NamePrefix:   "conformance-" + string(opts.Agent),
		Images:       []string{utils.PauseImage},
		ReadyTimeout: multiNodeReadyTimeout,
		Addons: func(ctx context.Context, c *utils.Cluster) error {
			start := time.Now()
			for _, n := range c.Nodes {
				if err := ImportImages(ctx, n.Containerd, opts.Images); err != nil {
					return fmt.Errorf("node %s: %w", n.Name, err)
				}
			}
			fmt.Fprintf(opts.Log, "cluster: e2e images imported in %s\n", time.Since(start).Round(100*time.Millisecond))
			start = time.Now()
			if err := utils.InstallClusterAddons(ctx, c); err != nil {
				return err
			}
			fmt.Fprintf(opts.Log, "cluster: kube-proxy and CoreDNS up in %s\n", time.Since(start).Round(100*time.Millisecond))
			return nil
		},
	}
	switch opts.Agent {
	case AgentNodelet:
		copts.NodeletConfig = map[string]any{"server": map[string]any{"port": KubeletPort}}
	case AgentKubelet:
		copts.StartAgent = utils.ClusterKubelet(filepath.Join(opts.BinDir, KubeletBinary), nil)
	default:
		return nil, fmt.Errorf("unknown node agent %q (want %s or %s)", opts.Agent, AgentNodelet, AgentKubelet)
	}
	start := time.Now()
	c, err := utils.StartCluster(ctx, copts)
	if err != nil {
		return nil, fmt.Errorf("starting the %d-node cluster: %w", opts.Nodes, err)
	}
	mc := &MultiNodeCluster{Cluster: c, Kubeconfig: c.Kubeconfig}
	fmt.Fprintf(opts.Log, "cluster: %d nodes of %s up in %s\n", opts.Nodes, opts.Agent, time.Since(start).Round(100*time.Millisecond))
	if err := waitServiceAccount(ctx, c.API); err != nil {
		return nil, fmt.Errorf("%w (stopping: %w)", err, c.Stop())
	}
	return mc, nil
}

// waitServiceAccount waits for default/default, which the suite checks
// before its first spec.
func waitServiceAccount(ctx context.Context, api *utils.APIServer) error {
	cl, err := api.AdminClient()
	if err != nil {
		return err
	}
	c := &Cluster{}
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		reason := c.serviceAccountMissing(ctx, cl)
		if reason == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ready after %s: %s", clusterReadyTimeout, reason)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// AgentLogs returns the node agents' and containerds' log paths by the
// file name a report keeps them under.
func (c *MultiNodeCluster) AgentLogs() map[string]string {
	logs := map[string]string{}
	for _, n := range c.Nodes {
		switch {
		case n.Nodelet != nil:
			logs[n.Name+"-nodelet.log"] = n.Nodelet.LogPath
		case n.Kubelet != nil:
			logs[n.Name+"-kubelet.log"] = n.Kubelet.LogPath
		}
		if n.Containerd != nil {
			logs[n.Name+"-containerd.log"] = n.Containerd.LogPath()
		}
	}
	return logs
}

// Leftovers returns a check, to run after Stop, that reports processes
// and mounts left in the nodes' directories.
func (c *MultiNodeCluster) Leftovers() func() string {
	var dirs []*Cluster
	for _, n := range c.Nodes {
		dirs = append(dirs, &Cluster{Containerd: n.Containerd, Nodelet: n.Nodelet, Kubelet: n.Kubelet})
	}
	dirs = append(dirs, &Cluster{API: c.API})
	checks := make([]func() string, 0, len(dirs))
	for _, d := range dirs {
		checks = append(checks, Leftovers(d))
	}
	return func() string {
		var out string
		for _, check := range checks {
			if l := check(); l != "" {
				if out != "" {
					out += "; "
				}
				out += l
			}
		}
		return out
	}
}
