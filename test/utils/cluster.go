package utils

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The shared addressing plan of a multi-node cluster on this machine.
const (
	// ServiceCIDR is the Service range (envtest's API server default).
	ServiceCIDR = "10.0.0.0/24"
	// clusterCIDRs is where the clusters' pod ranges are cut from: one /19
	// per node network slot (ClusterCIDRFor), so that clusters running at
	// once on this machine never route each other's pod subnets.
	clusterCIDRs = "10.244.0.0/14"
	// clusterCIDRBits is the size of one cluster's pod range: 32 nodes of
	// a /24.
	clusterCIDRBits = 19
	// nodeCIDRMaskSize is the size of each node's pod subnet.
	nodeCIDRMaskSize = "24"
)

// ClusterOptions describe a cluster for StartCluster.
type ClusterOptions struct {
	// Nodes is the number of nodes; 1 when zero.
	Nodes int
	// NamePrefix names the nodes <NamePrefix>-node-<i> (i from 1);
	// "nodelet" when empty.
	NamePrefix string
	// Images are imported into every node's containerd; nil means
	// TestImages plus WebImage.
	Images []string
	// NodeletConfig holds NodeletConfiguration fields for every node on
	// top of the cluster's (clusterDNS, clusterDomain, the node's
	// addresses).
	NodeletConfig map[string]any
	// Addons, when set, runs once every node is Ready and routed, before
	// StartCluster returns: where kube-proxy and the cluster DNS are
	// installed.
	Addons func(ctx context.Context, c *Cluster) error
	// Record, when set, is told about every part as soon as it exists,
	// before it is used, so that a caller can clean up after a run that is
	// killed (hack/localup's state).
	Record func(ClusterPart) error
	// StartAgent, when set, starts each node's agent instead of nodelet:
	// n.Containerd runs and n.Net is its namespace; it sets n.Kubelet
	// (ClusterKubelet) as soon as that exists, also on error, so that Stop
	// stops it.
	StartAgent func(ctx context.Context, c *Cluster, n *ClusterNode) error
	// ReadyTimeout bounds the wait for the nodes to be Ready with their
	// pod subnets routed; 3 minutes when zero.
	ReadyTimeout time.Duration
	// NodeMounts, when set, gives each node a mount namespace of its own
	// (StartNodeMounts, ClusterNode.Mounts) in which its containerd and a
	// StartAgent's agent (ClusterKubelet) run: a host of its own for what
	// an install writes to the paths it names.
	NodeMounts *NodeMountOptions
	// APIServerArgs are more kube-apiserver flags, name (without dashes)
	// to value: API versions the cluster serves (runtime-config), say.
	APIServerArgs map[string]string
	// CDISpecDirs are more directories of CDI specs every node's
	// containerd reads (ContainerdOptions.CDISpecDirs).
	CDISpecDirs []string
}

// ClusterPart is something StartCluster made: a node network, a directory
// whose processes and mounts are the cluster's, a containerd, or a
// nodelet's cgroup root. One field is set.
type ClusterPart struct {
	Network    *NodeNetwork
	Dirs       []string
	Containerd *Containerd
	CgroupRoot string
}

// ClusterNode is one node of a Cluster: a network namespace with its own
// containerd and nodelet.
type ClusterNode struct {
	// Index is i, from 1; Name is <prefix>-node-<i>.
	Index int
	Name  string
	// Net is the node's namespace and address on the node network.
	Net *NetNode
	// IP is the node's InternalIP (Net.IP).
	IP         net.IP
	Containerd *Containerd
	Nodelet    *Nodelet
	// Kubelet is the node's agent instead of Nodelet with StartAgent.
	Kubelet *Kubelet
	// Mounts is the node's mount namespace with ClusterOptions.NodeMounts.
	Mounts *NodeMounts
}

// Namespace is the name of the node's network namespace.
func (n *ClusterNode) Namespace() string { return n.Net.Namespace }

// ShellCommand is how a user gets a shell in the node's network
// namespace.
func (n *ClusterNode) ShellCommand() string { return "nsenter --net=" + n.Net.NetNSPath() + " bash" }

// Cluster is n nodes on one node network with a control plane on the host:
// etcd and kube-apiserver serving on the network's host address,
// kube-controller-manager allocating pod subnets, kube-scheduler; and a
// route controller of the harness that routes each node's pod subnet.
type Cluster struct {
	Options           ClusterOptions
	Network           *NodeNetwork
	API               *APIServer
	ControllerManager *Component
	Scheduler         *Component
	Nodes             []*ClusterNode
	// Kubeconfig is the admin's kubeconfig file.
	Kubeconfig string

	bootstrap *BootstrapToken
	stopRoute chan struct{}

	mu sync.Mutex
	// applied is the pod subnet routed per node index.
	applied map[int]string
	// appliedOther is the pod subnet routed per Node of another agent on
	// a node's address (nodelet's DaemonSet beside the node's agent).
	appliedOther map[string]string
	routeErr     error
	stopped      bool
}

// nodeContainerdOptions are node i's containerd options: the one place to
// change them for every node.
// containerd writes its CNI configuration from the pod CIDR nodelet hands
// it (the Node's spec.podCIDRs, CRI UpdateRuntimeConfig).
func (c *Cluster) nodeContainerdOptions(node *ClusterNode) ContainerdOptions {
	opts := ContainerdOptions{Images: c.Options.Images, NetNS: node.Net.Namespace, PodCIDRFromRuntime: true, CDISpecDirs: c.Options.CDISpecDirs}
	if node.Mounts != nil {
		opts.MountNS = node.Mounts.NSPath
	}
	return opts
}

// nodeletConfig is node i's NodeletConfiguration on top of the harness's.
func (c *Cluster) nodeletConfig() map[string]any {
	cfg := map[string]any{
		"clusterDNS":    []string{DefaultDNSIP},
		"clusterDomain": DefaultClusterDomain,
		// The default, as on a real node, where kube-proxy serves its
		// metrics on 127.0.0.1:10249 in the same network.
		"metricsBindAddress": nil,
	}
	for k, v := range c.Options.NodeletConfig {
		cfg[k] = v
	}
	return cfg
}

// StartCluster starts a cluster of opts.Nodes nodes and returns once every
// node is Ready and its pod subnet is routed (and the add-ons ran). On an
// error, what was started is stopped.
func StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	if most := min(maxNodes, 1<<(32-clusterCIDRBits-8)); opts.Nodes < 0 || opts.Nodes > most {
		return nil, fmt.Errorf("starting a cluster: %d nodes, want 1 to %d", opts.Nodes, most)
	}
	if opts.NamePrefix == "" {
		opts.NamePrefix = "nodelet"
	}
	if opts.Images == nil {
		opts.Images = append(append([]string{}, TestImages...), WebImage)
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 3 * time.Minute
	}
	if opts.Record == nil {
		opts.Record = func(ClusterPart) error { return nil }
	}
	if _, err := EnvtestAssets(ctx); err != nil {
		return nil, err
	}
	if _, err := NodeletBinary(ctx); err != nil {
		return nil, err
	}
	c := &Cluster{Options: opts, applied: map[int]string{}, appliedOther: map[string]string{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	steps := []func(context.Context) error{c.startNetwork, c.startControlPlane, c.startRouteController}
	for i := 1; i <= opts.Nodes; i++ {
		steps = append(steps, func(ctx context.Context) error { return c.startNode(ctx, i) })
	}
	steps = append(steps, c.WaitReady)
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return c, err
		}
	}
	if opts.Addons != nil {
		if err := opts.Addons(ctx, c); err != nil {
			return c, fmt.Errorf("installing the add-ons: %w", err)
		}
	}
	return c, nil
}

func (c *Cluster) startNetwork(context.Context) error {
	nw, err := StartNodeNetwork()
	if err != nil {
		return err
	}
	c.Network = nw
	if err := c.Options.Record(ClusterPart{Network: nw}); err != nil {
		return err
	}
	_, err = ClusterCIDRFor(nw.N)
	return err
}

// startControlPlane starts the API server on the network's host address,
// the controller-manager allocating node pod subnets, and the scheduler,
// and prepares TLS bootstrap.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	api, err := StartAPIServerWithOptions(ctx, APIServerOptions{
		BootstrapTokenAuth:      true,
		ServiceAccountAdmission: true,
		BindAddress:             c.Network.HostIP,
		Args:                    c.Options.APIServerArgs,
	})
	if err != nil {
		return err
	}
	c.API = api
	if err := c.Options.Record(ClusterPart{Dirs: api.Dirs()}); err != nil {
		return err
	}
	if c.Kubeconfig, err = api.AdminKubeconfig(); err != nil {
		return err
	}
	kcm, err := StartControllerManager(ctx, api, ControllerManagerOptions{Args: []string{
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + c.ClusterCIDR(),
		"--node-cidr-mask-size=" + nodeCIDRMaskSize,
		"--service-cluster-ip-range=" + ServiceCIDR,
		// A stopped node goes NotReady in 20 s rather than 50 s
		// (StopNode); nodes renew their Lease every 10 s.
		"--node-monitor-grace-period=20s",
	}})
	if err != nil {
		return err
	}
	c.ControllerManager = kcm
	if err := c.Options.Record(ClusterPart{Dirs: []string{kcm.Dir}}); err != nil {
		return err
	}
	sched, err := StartScheduler(ctx, api)
	if err != nil {
		return err
	}
	c.Scheduler = sched
	if err := c.Options.Record(ClusterPart{Dirs: []string{sched.Dir}}); err != nil {
		return err
	}
	c.bootstrap, err = api.SetUpTLSBootstrap(ctx)
	return err
}

// startRouteController watches Nodes and routes each node's pod subnet
// (spec.podCIDR) on the host and in the other nodes' namespaces as soon as
// the controller-manager allocates it.
func (c *Cluster) startRouteController(context.Context) error {
	cs, err := kubernetes.NewForConfig(c.API.Config)
	if err != nil {
		return fmt.Errorf("creating the route controller's client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Nodes().Informer()
	route := func(obj any) {
		if node, ok := obj.(*corev1.Node); ok {
			c.routeNode(node)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    route,
		UpdateFunc: func(_, obj any) { route(obj) },
	}); err != nil {
		return fmt.Errorf("watching Nodes: %w", err)
	}
	c.stopRoute = make(chan struct{})
	factory.Start(c.stopRoute)
	return nil
}

// routeNode routes node's pod subnet to it, when it is one of ours and
// has one.
func (c *Cluster) routeNode(node *corev1.Node) {
	cidr := node.Spec.PodCIDR
	if cidr == "" {
		return
	}
	ip := nodeInternalIP(node)
	if ip == nil {
		return
	}
	n := c.Network.NodeByIP(ip)
	if n == nil {
		return
	}
	// Another agent's Node on the node's address (nodelet's DaemonSet
	// beside the kubelet) is routed too, as a cloud's route controller
	// routes every Node, without taking the node's own route.
	cn := c.Node(n.Index)
	own := cn != nil && cn.Name == node.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || (own && c.applied[n.Index] == cidr) || (!own && c.appliedOther[node.Name] == cidr) {
		return
	}
	_, ipnet, err := net.ParseCIDR(cidr)
	if err == nil {
		if own {
			err = c.Network.SetPodCIDR(n.Index, ipnet)
		} else {
			err = c.Network.SetOtherPodCIDR(n.Index, node.Name, ipnet)
		}
	}
	if err != nil {
		c.routeErr = fmt.Errorf("routing pod subnet %s of node %s: %w", cidr, node.Name, err)
		return
	}
	if own {
		c.applied[n.Index] = cidr
	} else {
		c.appliedOther[node.Name] = cidr
	}
}

// nodeInternalIP is node's InternalIP address, or nil.
func nodeInternalIP(node *corev1.Node) net.IP {
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return net.ParseIP(a.Address)
		}
	}
	return nil
}

// startNode adds node i's namespace, starts its containerd and its
// nodelet there, which joins by TLS bootstrap.
func (c *Cluster) startNode(ctx context.Context, i int) error {
	netNode, err := c.Network.AddNode(i)
	if err != nil {
		return err
	}
	node := &ClusterNode{Index: i, Name: fmt.Sprintf("%s-node-%d", c.Options.NamePrefix, i), Net: netNode, IP: netNode.IP}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, node)
	c.mu.Unlock()
	if c.Options.NodeMounts != nil {
		mounts, err := StartNodeMounts(node.Name, netNode.Namespace, *c.Options.NodeMounts)
		if err != nil {
			return fmt.Errorf("making the mounts of node %s: %w", node.Name, err)
		}
		c.mu.Lock()
		node.Mounts = mounts
		c.mu.Unlock()
		if err := c.Options.Record(ClusterPart{Dirs: []string{mounts.Dir}}); err != nil {
			return err
		}
	}
	ctrd, err := StartContainerd(ctx, c.nodeContainerdOptions(node))
	if ctrd != nil {
		c.mu.Lock()
		node.Containerd = ctrd
		c.mu.Unlock()
		// Recorded even when the start failed: its directory may hold mounts.
		if rerr := c.Options.Record(ClusterPart{Containerd: ctrd}); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	if err != nil {
		return fmt.Errorf("starting the containerd of node %s: %w", node.Name, err)
	}
	if c.Options.StartAgent != nil {
		return c.Options.StartAgent(ctx, c, node)
	}
	dir, err := os.MkdirTemp("", "nodelet-"+node.Name+"-")
	if err != nil {
		return fmt.Errorf("creating the nodelet directory of %s: %w", node.Name, err)
	}
	if err := c.Options.Record(ClusterPart{Dirs: []string{dir}, CgroupRoot: E2ECgroupParent + "/" + filepath.Base(dir)}); err != nil {
		return err
	}
	// nodelet removes its bootstrap kubeconfig once it has joined: each
	// node gets a copy of the cluster's, so that one node's join does not
	// take the file from a node that starts after it.
	data, err := os.ReadFile(c.bootstrap.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the bootstrap kubeconfig for %s: %w", node.Name, err)
	}
	bootstrap := filepath.Join(dir, "bootstrap.kubeconfig")
	if err := os.WriteFile(bootstrap, data, 0o600); err != nil {
		return fmt.Errorf("writing the bootstrap kubeconfig of %s: %w", node.Name, err)
	}
	nl, err := StartNodelet(ctx, NodeletOptions{
		NodeName:            node.Name,
		API:                 c.API,
		Containerd:          ctrd,
		Config:              c.nodeletConfig(),
		Dir:                 dir,
		BootstrapKubeconfig: bootstrap,
		NetNS:               netNode.Namespace,
		NodeIP:              netNode.IP,
	})
	if nl != nil {
		c.mu.Lock()
		node.Nodelet = nl
		c.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("starting the nodelet of node %s: %w", node.Name, err)
	}
	return nil
}

// Node returns node i (from 1).
func (c *Cluster) Node(i int) *ClusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.Nodes {
		if n.Index == i {
			return n
		}
	}
	return nil
}

// AdminClient returns a client with the admin's credentials.
func (c *Cluster) AdminClient() (client.Client, error) { return c.API.AdminClient() }

// WaitReady waits until every node is Ready (its runtime's network too:
// it has its pod CIDR) and its pod subnet is routed.
func (c *Cluster) WaitReady(ctx context.Context) error {
	admin, err := c.AdminClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Options.ReadyTimeout)
	defer cancel()
	for {
		waiting := c.notReady(ctx, admin)
		if len(waiting) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			c.mu.Lock()
			routeErr := c.routeErr
			c.mu.Unlock()
			err := fmt.Errorf("waiting for the nodes to be Ready with their pod subnets routed: %w: %s", ctx.Err(), strings.Join(waiting, "; "))
			if routeErr != nil {
				err = fmt.Errorf("%w (last route error: %w)", err, routeErr)
			}
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// notReady says what each node that is not ready yet lacks.
func (c *Cluster) notReady(ctx context.Context, admin client.Client) []string {
	c.mu.Lock()
	nodes := append([]*ClusterNode{}, c.Nodes...)
	c.mu.Unlock()
	var waiting []string
	for _, n := range nodes {
		node := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			waiting = append(waiting, fmt.Sprintf("%s: %v", n.Name, err))
			continue
		}
		if !NodeReady(node) {
			waiting = append(waiting, n.Name+": not Ready")
			continue
		}
		c.mu.Lock()
		applied := c.applied[n.Index]
		c.mu.Unlock()
		if applied == "" || applied != node.Spec.PodCIDR {
			waiting = append(waiting, fmt.Sprintf("%s: pod subnet %q not routed yet", n.Name, node.Spec.PodCIDR))
		}
	}
	return waiting
}

// StopNode stops node i's nodelet only (SIGTERM), so that the node goes
// NotReady while its containerd and pods keep running.
func (c *Cluster) StopNode(i int) error {
	n := c.Node(i)
	if n == nil || n.Nodelet == nil {
		return fmt.Errorf("stopping node %d: no such node", i)
	}
	return n.Nodelet.Stop()
}

// StartNode starts node i's nodelet again after StopNode, on its state
// and credentials.
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	n := c.Node(i)
	if n == nil || n.Nodelet == nil {
		return fmt.Errorf("starting node %d: no such node", i)
	}
	return n.Nodelet.Restart(ctx)
}

// Stop stops everything, the nodes first (nodelet, then containerd, which
// removes the pods), then the control plane, then removes the node
// network. Safe to call twice and on a partly started cluster.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	nodes := append([]*ClusterNode{}, c.Nodes...)
	c.mu.Unlock()
	if c.stopRoute != nil {
		close(c.stopRoute)
	}
	var errs []error
	for _, n := range nodes {
		if n.Nodelet != nil {
			errs = append(errs, n.Nodelet.Stop())
		}
		if n.Kubelet != nil {
			n.Kubelet.Terminate()
		}
	}
	// The pods first: while they run, they write into the agents'
	// directories and keep their cgroups busy.
	for _, n := range nodes {
		if n.Containerd != nil {
			errs = append(errs, n.Containerd.Stop())
		}
		if n.Kubelet != nil {
			errs = append(errs, n.Kubelet.Stop())
		}
		if n.Nodelet != nil {
			errs = append(errs, n.Nodelet.Cleanup())
		}
	}
	for _, comp := range []*Component{c.Scheduler, c.ControllerManager} {
		if comp != nil {
			errs = append(errs, comp.Stop())
		}
	}
	if c.API != nil {
		errs = append(errs, c.API.Stop())
	}
	if c.Network != nil {
		errs = append(errs, c.Network.Stop())
	}
	// Once no process runs in them (the network's Stop kills those left).
	for _, n := range nodes {
		if n.Mounts != nil {
			errs = append(errs, n.Mounts.Stop())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping the cluster: %w", err)
	}
	return nil
}

// ClusterCIDRFor is the pod range of the cluster on node network slot n
// (from 1): the n-th /19 of 10.244.0.0/14, 10.244.0.0/19 for the first.
// The controller-manager gives each node a /24 of it (spec.podCIDR).
func ClusterCIDRFor(n int) (string, error) {
	_, all, _ := net.ParseCIDR(clusterCIDRs)
	ones, bits := all.Mask.Size()
	if n < 1 || n > 1<<(clusterCIDRBits-ones) {
		return "", fmt.Errorf("node network slot %d has no pod range: %s holds %d", n, clusterCIDRs, 1<<(clusterCIDRBits-ones))
	}
	base := binary.BigEndian.Uint32(all.IP.To4()) + uint32(n-1)<<(bits-clusterCIDRBits)
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, base)
	return fmt.Sprintf("%s/%d", ip, clusterCIDRBits), nil
}

// ClusterCIDR is the cluster's pod range (ClusterCIDRFor its network's
// slot).
func (c *Cluster) ClusterCIDR() string {
	cidr, _ := ClusterCIDRFor(c.Network.N)
	return cidr
}
