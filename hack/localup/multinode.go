package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/nodelet/nodelet/test/utils"
)

// nodesCount reads $NODES: how many nodes the cluster has (1 when empty).
// One node runs on the host's own network as before; more run each in a
// network namespace of its own (utils.StartCluster).
func nodesCount() (int, error) {
	v := os.Getenv("NODES")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("NODES=%q: want a number of nodes, 1 or more", v)
	}
	return n, nil
}

// multiNodeSteps bring up a cluster of c.nodes nodes on a node network:
// the control plane on the host, serving on the host's bridge address, and
// per node a network namespace with its own containerd and nodelet.
func (c *cluster) multiNodeSteps() []clusterStep {
	return []clusterStep{
		{"building the images " + fmt.Sprint(images) + " (compiles the first time)", c.buildImages},
		{"building nodelet", c.buildNodelet},
		{fmt.Sprintf("starting a cluster of %d nodes: a node network, the control plane, and per node a network namespace with its own containerd and nodelet; then kube-proxy and CoreDNS (their images compile the first time)", c.nodes), c.startMultiNode},
	}
}

func (c *cluster) startMultiNode(ctx context.Context) error {
	mc, err := utils.StartCluster(ctx, utils.ClusterOptions{
		Nodes:      c.nodes,
		NamePrefix: c.nodeName,
		Images:     images,
		Record:     c.recordPart,
		Addons:     utils.InstallClusterAddons,
	})
	if mc != nil {
		c.multi = mc
	}
	if err != nil {
		return err
	}
	return utils.WriteKubeconfig(c.st.kubeconfig(), mc.API.Config, "admin")
}

// recordPart records a part of the cluster in the state as soon as it
// exists, for make run-down after a run that was killed.
func (c *cluster) recordPart(p utils.ClusterPart) error {
	return c.st.record(func(s *state) {
		if p.Network != nil {
			s.Networks = append(s.Networks, p.Network.N)
		}
		s.Dirs = append(s.Dirs, p.Dirs...)
		if p.Containerd != nil {
			s.Containerds = append(s.Containerds, containerdState{Dir: p.Containerd.Dir, Bridge: p.Containerd.Bridge})
		}
		if p.CgroupRoot != "" {
			s.Cgroups = append(s.Cgroups, p.CgroupRoot)
		}
	})
}

// nodelets are the cluster's running agents.
func (c *cluster) nodelets() []*utils.Nodelet {
	if c.multi == nil {
		if c.nodelet == nil {
			return nil
		}
		return []*utils.Nodelet{c.nodelet}
	}
	var out []*utils.Nodelet
	for _, n := range c.multi.Nodes {
		if n.Nodelet != nil {
			out = append(out, n.Nodelet)
		}
	}
	return out
}

// nodeletLogs are the last lines of every agent's log.
func (c *cluster) nodeletLogs(lines int) string {
	var b strings.Builder
	for _, n := range c.nodelets() {
		fmt.Fprintf(&b, "nodelet log (%s):\n%s\n", n.LogPath, n.LogTail(lines))
	}
	return b.String()
}

// stopMultiNode stops a multi-node cluster.
func (c *cluster) stopMultiNode() error {
	if c.multi == nil {
		return nil
	}
	return c.multi.Stop()
}

// printMultiNodeUsage tells how to use a multi-node cluster from another
// shell and how to reach each node.
func printMultiNodeUsage(c *cluster) {
	mc := c.multi
	var nodes strings.Builder
	for _, n := range mc.Nodes {
		fmt.Fprintf(&nodes, "  %-24s %-15s %s\n", n.Name, n.IP, n.ShellCommand())
		fmt.Fprintf(&nodes, "  %-24s %-15s nodelet log %s\n", "", "", n.Nodelet.LogPath)
		fmt.Fprintf(&nodes, "  %-24s %-15s containerd log %s\n", "", "", n.Containerd.LogPath())
	}
	fmt.Printf(`
A cluster of %[1]d nodes is running on node network %[2]s (bridge %[3]s,
the API server on %[4]s), each node a network namespace with its own
containerd and nodelet, with kube-proxy and CoreDNS. Pod subnets are cut
from %[5]s, one per node.

Nodes (name, IP, a shell in its network namespace):
%[6]s
In another shell:

  export KUBECONFIG=%[7]s
  export PATH=%[8]s:$PATH    # kubectl %[9]s, built by hack/envtest.sh
  kubectl get nodes -o wide
  kubectl -n demo get pods -o wide
  kubectl -n kube-system get pods -o wide    # kube-proxy on every node, CoreDNS
  kubectl create deployment web --image=%[10]s --replicas=%[1]d
  kubectl expose deployment web --port=80 --target-port=8080
  kubectl rollout status deployment/web --timeout=2m
  kubectl -n demo exec deployment/demo -- wget -qO- http://web.default.svc.cluster.local/

Logs: kube-controller-manager %[11]s
      kube-scheduler %[12]s
Images on every node: %[13]s (built here; there is no registry).
Stop with Ctrl-C, or with make run-down from another shell.
`, len(mc.Nodes), mc.Network.Subnet, mc.Network.Bridge, mc.API.Config.Host, mc.ClusterCIDR(),
		nodes.String(), c.st.kubeconfig(), c.assets, kubernetesVersion(c.assets), utils.WebImage,
		mc.ControllerManager.LogPath, mc.Scheduler.LogPath, strings.Join(images, ", "))
}

// cleanUpMultiNode removes the containerds and node networks of a killed
// multi-node run; the processes under its directories are gone already.
func cleanUpMultiNode(st *state) error {
	var errs []error
	for _, ctrd := range st.Containerds {
		errs = append(errs, utils.TeardownContainerdDir(ctrd.Dir, ctrd.Bridge))
	}
	for _, n := range st.Networks {
		if _, err := utils.CleanupNodeNetwork(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
