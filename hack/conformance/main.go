package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/test/conformance"
)

type options struct {
	nodes   []conformance.Agent
	out     string
	procs   int
	timeout time.Duration
	focus   []string
	skip    []string
	list    bool
	smoke   bool
	// suite is "node" (the single-node selection), "network" (the
	// sig-network selection on a multi-node cluster of nodeCount nodes) or
	// "storage" (the CSI mock specs on a one-node cluster of the network
	// kind) or "dra" (the DRA specs on such a cluster) or "deviceplugin"
	// (our ports of the node suite's device plugin and pod resources
	// specs on a one-node cluster).
	suite     string
	nodeCount int
}

func main() {
	opts, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, opts)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func parseFlags() (options, error) {
	var o options
	node := flag.String("node", envOr("NODE", "both"), "node agent: nodelet, kubelet or both (env NODE)")
	flag.StringVar(&o.out, "out", os.Getenv("CONFORMANCE_OUT"), "report directory (env CONFORMANCE_OUT; the network and storage suites write to its subdirectory of their name; default $TMPDIR/nodelet-conformance[-<suite>]-<time>)")
	flag.IntVar(&o.procs, "procs", 2, "parallel ginkgo processes")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Hour, "timeout of each agent's suite")
	var focus, skip multiFlag
	flag.Var(&focus, "focus", "run the specs matching this expression instead of the selection, skips still apply (repeatable; env FOCUS)")
	flag.Var(&skip, "skip", "also skip specs matching this expression (repeatable)")
	flag.BoolVar(&o.list, "list", false, "print the selected specs and exit")
	flag.BoolVar(&o.smoke, "smoke", false, "run the smoke subset of make test instead of the whole selection")
	flag.StringVar(&o.suite, "suite", envOr("SUITE", "node"), "node: node and volume specs on one node; network: sig-network specs on a multi-node cluster with kube-proxy and CoreDNS; storage: the CSI mock specs on one node with kube-proxy and CoreDNS; dra: the dynamic resource allocation specs on such a node; deviceplugin: the node suite's device plugin and pod resources specs, ported, on one node (env SUITE)")
	flag.IntVar(&o.nodeCount, "nodes", 3, "nodes of the network suite's cluster")
	flag.Parse()
	if !slices.Contains([]string{"node", "network", "storage", "dra", "deviceplugin"}, o.suite) {
		return o, fmt.Errorf("-suite %q: want node, network, storage, dra or deviceplugin", o.suite)
	}
	if o.suite == "deviceplugin" && (o.list || o.smoke) {
		return o, errors.New("-list and -smoke are not for the deviceplugin suite")
	}
	o.out = reportDir(o.out, o.suite, time.Now())
	if o.suite == "network" && o.nodeCount < 2 {
		return o, fmt.Errorf("-nodes %d: the network suite needs 2 or more", o.nodeCount)
	}
	switch *node {
	case "both":
		o.nodes = []conformance.Agent{conformance.AgentNodelet, conformance.AgentKubelet}
	case string(conformance.AgentNodelet), string(conformance.AgentKubelet):
		o.nodes = []conformance.Agent{conformance.Agent(*node)}
	default:
		return o, fmt.Errorf("-node %q: want nodelet, kubelet or both", *node)
	}
	if f := os.Getenv("FOCUS"); f != "" {
		focus = append(focus, f)
	}
	o.focus, o.skip = focus, skip
	return o, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, o options) error {
	skips, err := conformance.SkipList()
	if err != nil {
		return err
	}
	if o.list {
		return list(ctx, selection(o, skips, conformance.AgentNodelet))
	}
	reports := map[conformance.Agent]*conformance.Report{}
	events := map[conformance.Agent]map[string][]string{}
	walls := map[conformance.Agent]time.Duration{}
	for _, agent := range o.nodes {
		start := time.Now()
		runOne := runAgent
		if o.suite == "deviceplugin" {
			runOne = runDevicePluginAgent
		}
		r, err := runOne(ctx, o, agent, selection(o, skips, agent))
		if err != nil {
			return fmt.Errorf("running the suite on %s: %w", agent, err)
		}
		reports[agent], walls[agent] = r, time.Since(start)
		if events[agent], err = conformance.AgentEvents(filepath.Join(o.out, string(agent), "e2e.log")); err != nil {
			return err
		}
		fmt.Printf("conformance: %s done in %s: %d passed, %d failed\n", agent, walls[agent].Round(time.Second), r.Count(conformance.Passed), r.Count(conformance.Failed))
	}
	// The skip list's entries of this suite: those its focus selects.
	summary := conformance.Summarize(o.nodes, reports, walls, conformance.SkipEntriesIn(skips, selection(o, nil, o.nodes[0]).focus), events)
	if o.suite == "deviceplugin" {
		summary = conformance.SpecTable(o.nodes, reports) + summary + notPorted()
	}
	fmt.Print(summary)
	if err := os.WriteFile(filepath.Join(o.out, "summary.txt"), []byte(summary), 0o644); err != nil {
		return fmt.Errorf("writing the summary: %w", err)
	}
	fmt.Printf("conformance: reports in %s\n", o.out)
	return nil
}

// selected is the focus and skip expressions of a run.
type selected struct {
	focus, skip []string
}

// selection is what runs on agent: the conformance focus (or -focus) minus
// the conformance skips, the skip list's entries for agent and -skip.
func selection(o options, skips []conformance.SkipEntry, agent conformance.Agent) selected {
	s := selected{focus: conformance.ConformanceFocus, skip: append(append([]string{}, conformance.ConformanceSkip...), conformance.SkipPatterns(skips, agent)...)}
	if o.smoke {
		s.focus = conformance.SmokeFocus
	}
	if o.suite == "network" {
		s.focus = conformance.NetworkFocus
		s.skip = append(s.skip, conformance.NetworkSkip...)
		if o.smoke {
			s.focus = conformance.NetworkSmokeFocus
		}
	}
	if o.suite == "storage" {
		s.focus = conformance.StorageFocus
		s.skip = append(append([]string{}, conformance.StorageSkip...), conformance.SkipPatterns(skips, agent)...)
	}
	if o.suite == "dra" {
		s.focus = conformance.DRAFocus
		s.skip = append(append([]string{}, conformance.DRASkip...), conformance.SkipPatterns(skips, agent)...)
	}
	if o.suite == "deviceplugin" {
		// Every spec of our ports runs: they are the selection.
		s.focus = conformance.DevicePluginFocus
		s.skip = conformance.SkipPatterns(skips, agent)
	}
	if len(o.focus) > 0 {
		// Ginkgo ORs focus expressions (and Go's regexp has no look-ahead
		// to AND them): an explicit focus replaces the selection's, the
		// skips stay.
		s.focus = o.focus
	}
	s.skip = append(s.skip, o.skip...)
	return s
}

func list(ctx context.Context, sel selected) error {
	bin, err := conformance.Binaries(ctx, os.Stderr, conformance.E2ETestBinary, conformance.GinkgoBinary)
	if err != nil {
		return err
	}
	names, err := conformance.List(ctx, bin, sel.focus, sel.skip)
	if err != nil {
		return err
	}
	for _, n := range names {
		fmt.Println(n)
	}
	fmt.Fprintf(os.Stderr, "conformance: %d specs selected\n", len(names))
	return nil
}

func runAgent(ctx context.Context, o options, agent conformance.Agent, sel selected) (_ *conformance.Report, err error) {
	needed := []string{conformance.E2ETestBinary, conformance.GinkgoBinary, conformance.AgnhostBinary}
	if agent == conformance.AgentKubelet {
		needed = append(needed, conformance.KubeletBinary)
	}
	bin, err := conformance.Binaries(ctx, os.Stderr, needed...)
	if err != nil {
		return nil, err
	}
	images, err := conformance.ImageArchives(ctx, filepath.Join(bin, conformance.AgnhostBinary))
	if err != nil {
		return nil, err
	}
	switch o.suite {
	case "storage":
		storage, err := conformance.StorageImageArchives(ctx, os.Stderr)
		if err != nil {
			return nil, err
		}
		maps.Copy(images, storage)
	case "dra":
		dra, err := conformance.DRAImageArchives(ctx, os.Stderr)
		if err != nil {
			return nil, err
		}
		maps.Copy(images, dra)
	}
	dir := filepath.Join(o.out, string(agent))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the report directory: %w", err)
	}
	var c startedCluster
	title := "the suite on " + string(agent)
	if o.suite == "network" || o.suite == "storage" || o.suite == "dra" {
		// The storage and DRA suites run on one node: their drivers'
		// manifests mount the node agent's root directory, which e2e.test
		// knows as one path.
		oneNode := o.suite != "network"
		nodes := o.nodeCount
		title = fmt.Sprintf("the network suite on %d nodes of %s", nodes, agent)
		if oneNode {
			nodes = 1
			title = "the " + o.suite + " suite on one node of " + string(agent)
		}
		mopts := conformance.MultiNodeOptions{Agent: agent, Nodes: nodes, BinDir: bin, Images: images, Log: os.Stdout}
		if o.suite == "dra" {
			mopts.APIServerArgs = conformance.DRAAPIServerArgs
			mopts.CDISpecDirs = []string{conformance.DRACDISpecDir}
		}
		if oneNode && agent == conformance.AgentNodelet {
			// Short, for the drivers' socket paths.
			if mopts.NodeletRootDir, err = agentDir(o.suite, "nlcsi-", "/tmp/nd"); err != nil {
				return nil, fmt.Errorf("creating nodelet's root directory: %w", err)
			}
		}
		if oneNode && agent == conformance.AgentKubelet {
			// The same for the kubelet, whose directory holds its root
			// (and is removed by its Stop).
			if mopts.KubeletDir, err = agentDir(o.suite, "nlk-", "/tmp/kd"); err != nil {
				return nil, fmt.Errorf("creating the kubelet's directory: %w", err)
			}
		}
		mc, err := conformance.StartMultiNodeCluster(ctx, mopts)
		if err != nil {
			return nil, errors.Join(err, removeRootDir(mopts.NodeletRootDir))
		}
		c = startedCluster{kubeconfig: mc.Kubeconfig, nodes: nodes, logs: mc.AgentLogs, leftovers: mc.Leftovers(), stop: mc.Stop}
		if mopts.NodeletRootDir != "" {
			c.stop = func() error { return errors.Join(mc.Stop(), removeRootDir(mopts.NodeletRootDir)) }
		}
		if oneNode {
			c.rootDir = mc.RootDir(mc.Nodes[0])
		}
	} else {
		sc, err := conformance.StartCluster(ctx, conformance.ClusterOptions{
			Agent: agent, NodeName: "conformance-" + string(agent), BinDir: bin, Images: images, Log: os.Stdout,
		})
		if err != nil {
			return nil, err
		}
		logs := func() map[string]string {
			return map[string]string{string(agent) + ".log": sc.AgentLog(), "containerd.log": sc.Containerd.LogPath()}
		}
		c = startedCluster{kubeconfig: sc.Kubeconfig, nodes: 1, logs: logs, leftovers: conformance.Leftovers(sc), stop: sc.Stop}
	}
	return runSuite(ctx, o, sel, bin, dir, title, c)
}

// agentDir makes a node agent's directory for the storage suite (a
// temporary directory named by prefix) or for the DRA suite, whose
// sockets are longer: a rolling update's DRA socket is
// <root>/plugins/<driver>/dra-<pod UID>.sock, 89 bytes past the root for
// the long driver name a spec uses, where a Unix socket's path has at most
// 107. The DRA suite's directory is short in the form <short><4 hex
// digits>, 11 bytes, so that the kubelet's root (<dir>/root) is 16 bytes,
// the length of /var/lib/kubelet.
func agentDir(suite, prefix, short string) (string, error) {
	if suite != "dra" {
		return os.MkdirTemp("", prefix)
	}
	for range 100 {
		dir := fmt.Sprintf("%s%04x", short, rand.IntN(1<<16))
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("creating the agent's directory: %w", err)
		}
	}
	return "", fmt.Errorf("creating the agent's directory: every name %s<4 hex digits> tried exists", short)
}

// removeRootDir removes a node agent's root directory made outside the
// cluster's directories (whose mounts the cluster's Stop undoes): what is
// still mounted under it, the volumes of pods the stopped agent left, is
// unmounted lazily, innermost first, then the directory is removed.
func removeRootDir(dir string) error {
	if dir == "" {
		return nil
	}
	for range 5 {
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			break
		}
		for i := len(mounts) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounts[i], unix.MNT_DETACH)
		}
	}
	if mounts, err := mountsUnder(dir); err != nil || len(mounts) > 0 {
		return errors.Join(err, fmt.Errorf("left mounted after the cluster stopped: %v", mounts))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the root directory: %w", err)
	}
	return nil
}

// mountsUnder lists the mount points at or below dir in mount order.
func mountsUnder(dir string) ([]string, error) {
	table, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	var mounts []string
	for _, line := range strings.Split(string(table), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			mounts = append(mounts, f[4])
		}
	}
	return mounts, nil
}

// startedCluster is what runSuite needs of a cluster the harness started.
type startedCluster struct {
	kubeconfig string
	nodes      int
	// logs names the files to keep with the report, by their name there.
	logs      func() map[string]string
	leftovers func() string
	stop      func() error
	// rootDir is the node agent's root directory for e2e.test's
	// --kubelet-root-dir; its default when empty.
	rootDir string
}

// runSuite runs the selection on c (title says what, in the progress
// line), then keeps its logs in dir, stops it and checks nothing is left.
func runSuite(ctx context.Context, o options, sel selected, bin, dir, title string, c startedCluster) (*conformance.Report, error) {
	return onCluster(dir, c, func(out io.Writer) (*conformance.Report, error) {
		fmt.Printf("conformance: running %s (%d procs); output in %s\n", title, o.procs, filepath.Join(dir, "e2e.log"))
		return conformance.Run(ctx, conformance.RunOptions{
			BinDir: bin, Kubeconfig: c.kubeconfig, Nodes: c.nodes, KubeletRootDir: c.rootDir, Focus: sel.focus, Skip: sel.skip,
			Procs: o.procs, ReportDir: dir, Timeout: o.timeout, Output: out,
		})
	})
}

// onCluster runs a suite on c with its output in dir/e2e.log (and the
// progress on stdout), then keeps c's logs in dir, stops it and checks
// nothing is left.
func onCluster(dir string, c startedCluster, run func(out io.Writer) (*conformance.Report, error)) (_ *conformance.Report, err error) {
	defer func() {
		// The logs are kept with the report; then nothing may be left.
		for name, path := range c.logs() {
			conformance.CopyFile(path, filepath.Join(dir, name))
		}
		if stopErr := c.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
		if left := c.leftovers(); left != "" && err == nil {
			err = fmt.Errorf("left behind after the cluster stopped: %s", left)
		}
	}()
	logf, err := os.Create(filepath.Join(dir, "e2e.log"))
	if err != nil {
		return nil, fmt.Errorf("creating the suite log: %w", err)
	}
	defer logf.Close()
	return run(io.MultiWriter(logf, conformance.ProgressWriter(os.Stdout)))
}

// runDevicePluginAgent runs the selection of our device plugin and pod
// resources specs on a one-node cluster of agent with the sample device
// plugin's image.
func runDevicePluginAgent(ctx context.Context, o options, agent conformance.Agent, sel selected) (*conformance.Report, error) {
	bin, err := conformance.DevicePluginBinaries(ctx, os.Stderr, agent)
	if err != nil {
		return nil, err
	}
	images, err := conformance.ImageArchives(ctx, filepath.Join(bin, conformance.AgnhostBinary))
	if err != nil {
		return nil, err
	}
	plugin, err := conformance.DevicePluginImageArchives(ctx, filepath.Join(bin, conformance.SampleDevicePluginBinary))
	if err != nil {
		return nil, err
	}
	maps.Copy(images, plugin)
	// Built before the cluster starts, so that its clock does not run
	// while the specs compile.
	if _, err := conformance.DevicePluginSpecsBinary(ctx); err != nil {
		return nil, err
	}
	dir := filepath.Join(o.out, string(agent))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the report directory: %w", err)
	}
	sc, err := conformance.StartCluster(ctx, conformance.ClusterOptions{
		Agent: agent, NodeName: "deviceplugin-" + string(agent), BinDir: bin, Images: images, Log: os.Stdout,
	})
	if err != nil {
		return nil, err
	}
	logs := func() map[string]string {
		return map[string]string{string(agent) + ".log": sc.AgentLog(), "containerd.log": sc.Containerd.LogPath()}
	}
	c := startedCluster{kubeconfig: sc.Kubeconfig, nodes: 1, logs: logs, leftovers: conformance.Leftovers(sc), stop: sc.Stop}
	return onCluster(dir, c, func(out io.Writer) (*conformance.Report, error) {
		fmt.Printf("conformance: running the device plugin suite on %s; output in %s\n", agent, filepath.Join(dir, "e2e.log"))
		return conformance.RunDevicePluginSpecs(ctx, conformance.DevicePluginRunOptions{
			Cluster: sc, ReportDir: dir, Focus: sel.focus, Skip: sel.skip, Timeout: o.timeout, Output: out,
		})
	})
}

// notPorted lists the node suite's specs the deviceplugin suite leaves
// out, with why.
func notPorted() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nNot ported (%d):\n", len(conformance.DevicePluginNotPorted))
	for _, e := range conformance.DevicePluginNotPorted {
		fmt.Fprintf(&b, "- %s\n    %s\n", e.Name, e.Reason)
	}
	return b.String()
}

// reportDir is where a suite's reports go: under out, in a subdirectory
// named after the suite except for the node suite, so that make
// conformance's suites can share one CONFORMANCE_OUT; without out, a new
// directory in $TMPDIR named after the suite and the time.
func reportDir(out, suite string, now time.Time) string {
	if out == "" {
		name := "nodelet-conformance-"
		if suite != "node" {
			name += suite + "-"
		}
		return filepath.Join(os.TempDir(), name+now.Format("20060102-150405"))
	}
	if suite == "node" {
		return out
	}
	return filepath.Join(out, suite)
}
