package utils

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A node network is the L2 segment that the nodes of a multi-node cluster
// on this machine share: a bridge on the host with the first address of a
// /24 of NodeNetworkPrefix, and per node a network namespace joined to it
// by a veth pair. Every name it makes starts with nodeNetNamePrefix and
// its slot number N, so that a cleanup finds what a killed run left:
//
//	bridge      nlnet<N>            (host, 10.251.N.1/24)
//	namespace   nlnet<N>-node<i>    (eth0 10.251.N.(10+i)/24, lo)
//	veth        nlnet<N>v<i>        (host end, on the bridge)
const (
	// NodeNetworkPrefix is the /16 the node networks are cut from.
	NodeNetworkPrefix = "10.251"
	// nodeNetNamePrefix starts the name of every bridge, namespace and
	// veth of a node network.
	nodeNetNamePrefix = "nlnet"
	// netSlotDir holds one lock file per node network 10.251.N.0/24,
	// flocked by its holder for its whole life, naming nothing: the slot
	// number is all a cleanup needs.
	netSlotDir = "/run/nodelet/network-slots"
	// maxNodes bounds the nodes of one network (addresses .10 to .250).
	maxNodes = 240
	// netnsDir is where ip netns keeps its named namespaces.
	netnsDir = "/run/netns"
)

// NodeNetwork is a node network started by StartNodeNetwork.
type NodeNetwork struct {
	// N is the slot: the network is 10.251.N.0/24.
	N int
	// Bridge is the host bridge (nlnet<N>).
	Bridge string
	// Subnet is 10.251.N.0/24.
	Subnet *net.IPNet
	// HostIP is the host's address on Bridge (10.251.N.1), which the
	// nodes' default routes point to and the API server listens on.
	HostIP net.IP

	lock *os.File

	mu      sync.Mutex
	nodes   map[int]*NetNode
	routes  routePlan // applied
	stopped bool
}

// NetNode is one node's place on a NodeNetwork.
type NetNode struct {
	// Index is i: the node's address is 10.251.N.(10+i).
	Index int
	// Namespace is the name of its network namespace (ip netns).
	Namespace string
	// IP is its address on eth0.
	IP net.IP
	// HostVeth is the host end of its veth pair, on the bridge.
	HostVeth string
	// PodCIDR is the pod subnet routed to it, once SetPodCIDR set one.
	PodCIDR *net.IPNet
	// OtherPodCIDRs are the pod subnets of other Nodes on its address
	// (SetOtherPodCIDR), by Node name.
	OtherPodCIDRs map[string]*net.IPNet
}

// podCIDRs are the pod subnets routed to the node: PodCIDR, then the
// others by Node name.
func (n *NetNode) podCIDRs() []*net.IPNet {
	var out []*net.IPNet
	if n.PodCIDR != nil {
		out = append(out, n.PodCIDR)
	}
	names := make([]string, 0, len(n.OtherPodCIDRs))
	for name := range n.OtherPodCIDRs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		out = append(out, n.OtherPodCIDRs[name])
	}
	return out
}

// NetNSPath is the namespace's file, for nsenter --net=.
func (n *NetNode) NetNSPath() string { return NetNSPath(n.Namespace) }

// NetNSPath is the file of the named network namespace.
func NetNSPath(name string) string { return filepath.Join(netnsDir, name) }

// Nsenter returns the command that runs args in the node's network
// namespace only (its mount namespace stays the host's).
func (n *NetNode) Nsenter(args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + n.NetNSPath()}, args...)...)
}

// StartNodeNetwork picks a free slot N (cleaning up what a dead holder of
// it left), creates the bridge with the host's address and makes sure the
// host forwards. AddNode adds nodes; Stop removes everything.
func StartNodeNetwork() (_ *NodeNetwork, err error) {
	if err := ensureDeps(context.Background(), "ip", "nsenter"); err != nil {
		return nil, err
	}
	nw := &NodeNetwork{nodes: map[int]*NetNode{}}
	nw.N, nw.lock, err = acquireNetSlot()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, nw.Stop())
		}
	}()
	nw.Bridge = bridgeName(nw.N)
	_, nw.Subnet, _ = net.ParseCIDR(fmt.Sprintf("%s.%d.0/24", NodeNetworkPrefix, nw.N))
	nw.HostIP = net.ParseIP(fmt.Sprintf("%s.%d.1", NodeNetworkPrefix, nw.N)).To4()
	if err := runCmd("ip", "link", "add", nw.Bridge, "type", "bridge"); err != nil {
		return nil, err
	}
	if err := runCmd("ip", "addr", "add", nw.HostIP.String()+"/24", "dev", nw.Bridge); err != nil {
		return nil, err
	}
	if err := runCmd("ip", "link", "set", nw.Bridge, "up"); err != nil {
		return nil, err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return nil, fmt.Errorf("turning on IP forwarding on the host: %w", err)
	}
	return nw, nil
}

func bridgeName(n int) string { return fmt.Sprintf("%s%d", nodeNetNamePrefix, n) }

func namespaceName(n, i int) string { return fmt.Sprintf("%s%d-node%d", nodeNetNamePrefix, n, i) }

func hostVethName(n, i int) string { return fmt.Sprintf("%s%dv%d", nodeNetNamePrefix, n, i) }

// NodeAddress is node i's address in subnet: .(10+i).
func NodeAddress(subnet *net.IPNet, i int) net.IP {
	ip := slices.Clone(subnet.IP.To4())
	ip[3] = byte(10 + i)
	return ip
}

// nodeSysctls are set in every node's namespace: it routes its pods'
// traffic, and bridged pod traffic goes through its iptables (kube-proxy's
// rules). The namespace's own values start from the kernel's defaults.
var nodeSysctls = map[string]string{
	"net/ipv4/ip_forward":                 "1",
	"net/bridge/bridge-nf-call-iptables":  "1",
	"net/bridge/bridge-nf-call-ip6tables": "1",
	"net/ipv4/conf/all/route_localnet":    "1",
}

// AddNode creates node i's namespace and veth pair: eth0 with
// 10.251.N.(10+i)/24, lo up, a default route via the host, the routes to
// the other nodes' pod subnets known so far, and nodeSysctls.
func (nw *NodeNetwork) AddNode(i int) (_ *NetNode, err error) {
	if i < 1 || i > maxNodes {
		return nil, fmt.Errorf("adding node %d: the index must be in 1..%d", i, maxNodes)
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.stopped {
		return nil, errors.New("adding a node: the network was stopped")
	}
	if _, ok := nw.nodes[i]; ok {
		return nil, fmt.Errorf("adding node %d: it exists", i)
	}
	node := &NetNode{Index: i, Namespace: namespaceName(nw.N, i), IP: NodeAddress(nw.Subnet, i), HostVeth: hostVethName(nw.N, i)}
	nw.nodes[i] = node
	peer := node.HostVeth + "p"
	steps := [][]string{
		{"ip", "netns", "add", node.Namespace},
		{"ip", "link", "add", node.HostVeth, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", node.HostVeth, "master", nw.Bridge},
		{"ip", "link", "set", node.HostVeth, "up"},
		{"ip", "link", "set", peer, "netns", node.Namespace},
		{"ip", "-n", node.Namespace, "link", "set", peer, "name", "eth0"},
		{"ip", "-n", node.Namespace, "addr", "add", node.IP.String() + "/24", "dev", "eth0"},
		{"ip", "-n", node.Namespace, "link", "set", "eth0", "up"},
		{"ip", "-n", node.Namespace, "link", "set", "lo", "up"},
		{"ip", "-n", node.Namespace, "route", "add", "default", "via", nw.HostIP.String()},
	}
	for _, s := range steps {
		if err := runCmd(s...); err != nil {
			return nil, fmt.Errorf("adding node %d: %w", i, err)
		}
	}
	keys := make([]string, 0, len(nodeSysctls))
	for k := range nodeSysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := runCmd("nsenter", "--net="+node.NetNSPath(), "sysctl", "-q", "-w", strings.ReplaceAll(k, "/", ".")+"="+nodeSysctls[k]); err != nil {
			return nil, fmt.Errorf("adding node %d: %w", i, err)
		}
	}
	if err := nw.syncRoutesLocked(); err != nil {
		return nil, fmt.Errorf("adding node %d: %w", i, err)
	}
	return node, nil
}

// Node returns node i, or nil.
func (nw *NodeNetwork) Node(i int) *NetNode {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.nodes[i]
}

// NodeByIP returns the node with address ip, or nil.
func (nw *NodeNetwork) NodeByIP(ip net.IP) *NetNode {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for _, n := range nw.nodes {
		if n.IP.Equal(ip) {
			return n
		}
	}
	return nil
}

// SetPodCIDR routes cidr to node i: on the host and in every other node's
// namespace, directly via the node's address (all nodes share the L2
// segment), which is what a cloud's route controller does for a cluster.
// Setting the same CIDR again does nothing.
func (nw *NodeNetwork) SetPodCIDR(i int, cidr *net.IPNet) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	node, ok := nw.nodes[i]
	if !ok {
		return fmt.Errorf("routing a pod subnet to node %d: no such node", i)
	}
	node.PodCIDR = cidr
	return nw.syncRoutesLocked()
}

// SetOtherPodCIDR routes cidr, the pod subnet of Node name, another agent's
// Node on node i's address, to node i as SetPodCIDR does, beside the
// node's own.
func (nw *NodeNetwork) SetOtherPodCIDR(i int, name string, cidr *net.IPNet) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	node, ok := nw.nodes[i]
	if !ok {
		return fmt.Errorf("routing a pod subnet to node %d: no such node", i)
	}
	if node.OtherPodCIDRs == nil {
		node.OtherPodCIDRs = map[string]*net.IPNet{}
	}
	node.OtherPodCIDRs[name] = cidr
	return nw.syncRoutesLocked()
}

// route is one route to apply: in Namespace ("" for the host), Dst via Via.
type route struct {
	Namespace string
	Dst       string
	Via       string
}

// routePlan is a set of routes.
type routePlan []route

// planRoutes computes the routes of the nodes' pod subnets: on the host to
// each node, and in each node's namespace to every other node. Nodes
// without a pod subnet get none and are routed to by none.
func planRoutes(nodes []*NetNode) routePlan {
	var plan routePlan
	for _, dst := range nodes {
		for _, cidr := range dst.podCIDRs() {
			plan = append(plan, route{Dst: cidr.String(), Via: dst.IP.String()})
			for _, from := range nodes {
				if from.Index != dst.Index {
					plan = append(plan, route{Namespace: from.Namespace, Dst: cidr.String(), Via: dst.IP.String()})
				}
			}
		}
	}
	sort.Slice(plan, func(a, b int) bool {
		if plan[a].Namespace != plan[b].Namespace {
			return plan[a].Namespace < plan[b].Namespace
		}
		return plan[a].Dst < plan[b].Dst
	})
	return plan
}

// diffRoutes returns the routes of want that have is lacks, and those of
// have whose destination want routes nowhere in the same namespace.
func diffRoutes(have, want routePlan) (add, remove routePlan) {
	for _, r := range want {
		if !slices.Contains(have, r) {
			add = append(add, r)
		}
	}
	for _, r := range have {
		if !slices.ContainsFunc(want, func(w route) bool { return w.Namespace == r.Namespace && w.Dst == r.Dst }) {
			remove = append(remove, r)
		}
	}
	return add, remove
}

func (r route) args(verb string) []string {
	args := []string{"ip"}
	if r.Namespace != "" {
		args = append(args, "-n", r.Namespace)
	}
	return append(args, "route", verb, r.Dst, "via", r.Via)
}

func (nw *NodeNetwork) syncRoutesLocked() error {
	nodes := make([]*NetNode, 0, len(nw.nodes))
	for _, n := range nw.nodes {
		nodes = append(nodes, n)
	}
	want := planRoutes(nodes)
	add, remove := diffRoutes(nw.routes, want)
	var errs []error
	for _, r := range remove {
		_ = runCmd(r.args("del")...) // gone with its namespace or node already
	}
	for _, r := range add {
		if err := runCmd(r.args("replace")...); err != nil {
			errs = append(errs, fmt.Errorf("routing pod subnet %s: %w", r.Dst, err))
		}
	}
	nw.routes = want
	return errors.Join(errs...)
}

// Stop removes the network: the host routes of the pod subnets, every
// node's namespace (and so its end of the veth), the host ends, the
// bridge, and releases the slot. Processes still in a namespace keep it
// alive but unnamed: stop them first. Safe to call twice.
func (nw *NodeNetwork) Stop() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.stopped {
		return nil
	}
	nw.stopped = true
	for _, r := range nw.routes {
		if r.Namespace == "" {
			_ = runCmd(r.args("del")...)
		}
	}
	nw.routes = nil
	err := TeardownNodeNetwork(nw.N)
	if nw.lock != nil {
		_ = nw.lock.Truncate(0)
		_ = nw.lock.Close()
	}
	return err
}

// Abandon lets go of the network's slot without removing anything, as a
// process that is killed does: what it made stays until
// CleanupNodeNetworks (or the next holder of the slot) removes it. Stop
// does nothing afterwards.
func (nw *NodeNetwork) Abandon() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.stopped = true
	if nw.lock != nil {
		_ = nw.lock.Close()
		nw.lock = nil
	}
}

// TeardownNodeNetwork removes what node network N has on this machine:
// the processes that run in its namespaces (SIGKILL), the namespaces, the
// host ends of the veths, the bridge, and the host routes through it.
// What is not there is skipped.
func TeardownNodeNetwork(n int) error {
	var errs []error
	prefix := bridgeName(n) + "-node"
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("listing network namespaces: %w", err))
	}
	var namespaces []string
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e.Name(), prefix); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				namespaces = append(namespaces, e.Name())
			}
		}
	}
	if err := killProcessesInNetNS(namespaces); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range namespaces {
		if err := runCmd("ip", "netns", "delete", ns); err != nil {
			errs = append(errs, err)
		}
	}
	links, err := net.Interfaces()
	if err != nil {
		errs = append(errs, fmt.Errorf("listing links: %w", err))
	}
	veth := fmt.Sprintf("%s%dv", nodeNetNamePrefix, n)
	for _, l := range links {
		if rest, ok := strings.CutPrefix(l.Name, veth); ok {
			if _, err := strconv.Atoi(strings.TrimSuffix(rest, "p")); err == nil {
				_ = runCmd("ip", "link", "delete", l.Name) // a veth goes with its peer
			}
		}
	}
	// The kernel drops the routes through the bridge's subnet with it.
	if err := deleteBridge(bridgeName(n)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killProcessesInNetNS SIGKILLs every process, other than this one, whose
// network namespace is one of the named ones, and waits for them to go.
func killProcessesInNetNS(namespaces []string) error {
	if len(namespaces) == 0 {
		return nil
	}
	inodes := map[uint64]bool{}
	for _, ns := range namespaces {
		var st unix.Stat_t
		if err := unix.Stat(NetNSPath(ns), &st); err == nil {
			inodes[st.Ino] = true
		}
	}
	pids, err := processesInNetNS(inodes)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			return fmt.Errorf("process %d in a node network namespace survived SIGKILL", pid)
		}
	}
	return nil
}

// processesInNetNS lists the processes, other than this one, in one of the
// network namespaces with the given inodes.
func processesInNetNS(inodes map[uint64]bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st); err != nil {
			continue
		}
		if inodes[st.Ino] {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// CleanupNodeNetworks tears down every node network whose slot no running
// process holds: what killed runs left. It returns the slots it cleaned.
func CleanupNodeNetworks() ([]int, error) {
	var cleaned []int
	var errs []error
	for n := 1; n <= maxSlot; n++ {
		if !nodeNetworkPresent(n) {
			continue
		}
		done, err := CleanupNodeNetwork(n)
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			cleaned = append(cleaned, n)
		}
	}
	return cleaned, errors.Join(errs...)
}

// CleanupNodeNetwork tears down node network n when no running process
// holds its slot (a killed run's), and reports whether it did: a network
// whose slot is held is a running cluster's, perhaps one that took the
// slot since, and is left alone.
func CleanupNodeNetwork(n int) (bool, error) {
	f, err := lockNetSlot(n)
	if err != nil {
		return false, nil //nolint:nilerr // held: a running cluster's
	}
	defer f.Close()
	if err := TeardownNodeNetwork(n); err != nil {
		return true, fmt.Errorf("cleaning up node network %d: %w", n, err)
	}
	return true, nil
}

// nodeNetworkPresent reports whether the bridge or a namespace of network
// n exists.
func nodeNetworkPresent(n int) bool {
	if _, err := net.InterfaceByName(bridgeName(n)); err == nil {
		return true
	}
	matches, _ := filepath.Glob(filepath.Join(netnsDir, bridgeName(n)+"-node*"))
	return len(matches) > 0
}

// lockNetSlot takes slot n's lock without waiting.
func lockNetSlot(n int) (*os.File, error) {
	if err := os.MkdirAll(netSlotDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", netSlotDir, err)
	}
	path := filepath.Join(netSlotDir, fmt.Sprintf("%d.lock", n))
	f, err := tryLockSlot(path)
	if err == nil && f == nil {
		err = fmt.Errorf("locking %s: held by another process", path)
	}
	return f, err
}

// acquireNetSlot takes the lowest free slot whose subnet no interface of
// this machine uses, after removing what a dead holder left.
func acquireNetSlot() (int, *os.File, error) {
	for n := 1; n <= maxSlot; n++ {
		f, err := lockNetSlot(n)
		if err != nil {
			continue
		}
		_ = TeardownNodeNetwork(n)
		if nodeSubnetInUse(n) {
			f.Close()
			continue
		}
		if _, err := f.Seek(0, io.SeekStart); err == nil {
			_ = f.Truncate(0)
			_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
		}
		return n, f, nil
	}
	return 0, nil, fmt.Errorf("no free node network: all %d slots in %s are held", maxSlot, netSlotDir)
}

// nodeSubnetInUse reports whether an interface of the host has an address
// in 10.251.n.0/24.
func nodeSubnetInUse(n int) bool {
	_, subnet, _ := net.ParseCIDR(fmt.Sprintf("%s.%d.0/24", NodeNetworkPrefix, n))
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && subnet.Contains(ipn.IP) {
			return true
		}
	}
	return false
}

// runCmd runs a command and returns its output in the error.
func runCmd(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
