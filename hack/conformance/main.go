package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
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
	// suite is "node" (the single-node selection) or "network" (the
	// sig-network selection on a multi-node cluster of nodeCount nodes).
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
	flag.StringVar(&o.out, "out", envOr("CONFORMANCE_OUT", filepath.Join(os.TempDir(), "nodelet-conformance-"+time.Now().Format("20060102-150405"))), "report directory (env CONFORMANCE_OUT)")
	flag.IntVar(&o.procs, "procs", 2, "parallel ginkgo processes")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Hour, "timeout of each agent's suite")
	var focus, skip multiFlag
	flag.Var(&focus, "focus", "run the specs matching this expression instead of the selection, skips still apply (repeatable; env FOCUS)")
	flag.Var(&skip, "skip", "also skip specs matching this expression (repeatable)")
	flag.BoolVar(&o.list, "list", false, "print the selected specs and exit")
	flag.BoolVar(&o.smoke, "smoke", false, "run the smoke subset of make test instead of the whole selection")
	flag.StringVar(&o.suite, "suite", envOr("SUITE", "node"), "node: node and volume specs on one node; network: sig-network specs on a multi-node cluster with kube-proxy and CoreDNS (env SUITE)")
	flag.IntVar(&o.nodeCount, "nodes", 3, "nodes of the network suite's cluster")
	flag.Parse()
	if o.suite != "node" && o.suite != "network" {
		return o, fmt.Errorf("-suite %q: want node or network", o.suite)
	}
	if o.nodeCount < 2 {
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
		r, err := runAgent(ctx, o, agent, selection(o, skips, agent))
		if err != nil {
			return fmt.Errorf("running the suite on %s: %w", agent, err)
		}
		reports[agent], walls[agent] = r, time.Since(start)
		if events[agent], err = conformance.AgentEvents(filepath.Join(o.out, string(agent), "e2e.log")); err != nil {
			return err
		}
		fmt.Printf("conformance: %s done in %s: %d passed, %d failed\n", agent, walls[agent].Round(time.Second), r.Count(conformance.Passed), r.Count(conformance.Failed))
	}
	summary := conformance.Summarize(o.nodes, reports, walls, skips, events)
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
	dir := filepath.Join(o.out, string(agent))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the report directory: %w", err)
	}
	var c startedCluster
	title := "the suite on " + string(agent)
	if o.suite == "network" {
		title = fmt.Sprintf("the network suite on %d nodes of %s", o.nodeCount, agent)
		mc, err := conformance.StartMultiNodeCluster(ctx, conformance.MultiNodeOptions{
			Agent: agent, Nodes: o.nodeCount, BinDir: bin, Images: images, Log: os.Stdout,
		})
		if err != nil {
			return nil, err
		}
		c = startedCluster{kubeconfig: mc.Kubeconfig, nodes: o.nodeCount, logs: mc.AgentLogs, leftovers: mc.Leftovers(), stop: mc.Stop}
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

// startedCluster is what runSuite needs of a cluster the harness started.
type startedCluster struct {
	kubeconfig string
	nodes      int
	// logs names the files to keep with the report, by their name there.
	logs      func() map[string]string
	leftovers func() string
	stop      func() error
}

// runSuite runs the selection on c (title says what, in the progress
// line), then keeps its logs in dir, stops it and checks nothing is left.
func runSuite(ctx context.Context, o options, sel selected, bin, dir, title string, c startedCluster) (_ *conformance.Report, err error) {
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
	fmt.Printf("conformance: running %s (%d procs); output in %s\n", title, o.procs, logf.Name())
	return conformance.Run(ctx, conformance.RunOptions{
		BinDir: bin, Kubeconfig: c.kubeconfig, Nodes: c.nodes, Focus: sel.focus, Skip: sel.skip,
		Procs: o.procs, ReportDir: dir, Timeout: o.timeout, Output: io.MultiWriter(logf, conformance.ProgressWriter(os.Stdout)),
	})
}
