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
	// NodeletRootDir, when set, is nodelet's root directory instead of
	// one under its own directory (one node only). The CSI specs need a
	// short one: a Unix socket's path has at most 107 bytes, and the
	// registration socket of their driver is
	// <root>/plugins_registry/csi-mock-<namespace>-reg.sock.
	NodeletRootDir string
	// KubeletDir, when set, is the kubelet's directory (one node only),
	// whose root is <KubeletDir>/root: short for the same reason.
	KubeletDir string
	// APIServerArgs are more kube-apiserver flags (name without dashes →
	// value).
	APIServerArgs map[string]string
	// CDISpecDirs are more directories of CDI specs the nodes' containerds
	// read.
	CDISpecDirs []string
}

// MultiNodeCluster is a started multi-node cluster.
type MultiNodeCluster struct {
	*utils.Cluster
	// Kubeconfig is the admin's kubeconfig, for e2e.test.
	Kubeconfig string

	nodeletRootDir string
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
		Nodes:         opts.Nodes,
		NamePrefix:    "conformance-" + string(opts.Agent),
		Images:        []string{utils.PauseImage},
		ReadyTimeout:  multiNodeReadyTimeout,
		APIServerArgs: opts.APIServerArgs,
		CDISpecDirs:   opts.CDISpecDirs,
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
		if opts.NodeletRootDir != "" {
			if opts.Nodes != 1 {
				return nil, fmt.Errorf("a nodelet root directory for %d nodes: one node only", opts.Nodes)
			}
			copts.NodeletConfig["rootDir"] = opts.NodeletRootDir
		}
	case AgentKubelet:
		var edit []func(*utils.KubeletOptions)
		if opts.KubeletDir != "" {
			if opts.Nodes != 1 {
				return nil, fmt.Errorf("a kubelet directory for %d nodes: one node only", opts.Nodes)
			}
			edit = append(edit, func(k *utils.KubeletOptions) { k.Dir = opts.KubeletDir })
		}
		copts.StartAgent = utils.ClusterKubelet(filepath.Join(opts.BinDir, KubeletBinary), nil, edit...)
	default:
		return nil, fmt.Errorf("unknown node agent %q (want %s or %s)", opts.Agent, AgentNodelet, AgentKubelet)
	}
	start := time.Now()
	c, err := utils.StartCluster(ctx, copts)
	if err != nil {
		return nil, fmt.Errorf("starting the %d-node cluster: %w", opts.Nodes, err)
	}
	mc := &MultiNodeCluster{Cluster: c, Kubeconfig: c.Kubeconfig, nodeletRootDir: opts.NodeletRootDir}
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

// RootDir returns the root directory of n's node agent (nodelet's
// rootDir, the kubelet's --root-dir).
func (c *MultiNodeCluster) RootDir(n *utils.ClusterNode) string {
	switch {
	case n.Nodelet != nil && c.nodeletRootDir != "":
		return c.nodeletRootDir
	case n.Nodelet != nil:
		return n.Nodelet.RootDir
	case n.Kubelet != nil:
		return filepath.Join(n.Kubelet.Dir, "root")
	}
	return ""
}

// DRAAPIServerArgs serve the resource.k8s.io versions besides v1 that the
// DRA specs use, as the specs' own cluster configuration does
// (test/e2e/dra/kind.yaml): v1beta1 and v1beta2 (the specs "with v1beta1
// API" and "with v1beta2 API"), and v1alpha3 (ResourcePoolStatusRequests,
// whose gate DRAResourcePoolStatus is on by default). Feature gates stay
// at their defaults.
var DRAAPIServerArgs = map[string]string{
	"runtime-config": "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true,resource.k8s.io/v1alpha3=true",
}

// DRACDISpecDir is where the DRA test driver's pod writes the CDI specs of
// the devices it prepares: a hostPath volume of dra-test-driver-proxy.yaml
// that e2e.test does not move with the agent's root directory. The node's
// containerd reads it besides its own CDI directory.
const DRACDISpecDir = "/var/run/cdi"
