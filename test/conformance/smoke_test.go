package conformance

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/test/utils"
)

// smokeTimeout bounds the smoke suite; the first run also builds e2e.test,
// ginkgo and agnhost, which Binaries does before the clock starts.
const smokeTimeout = 15 * time.Minute

// TestSmoke runs SmokeFocus, a few of Kubernetes' conformance specs (pods,
// logs, exec, environment, ConfigMap and projected volumes), against
// nodelet, and fails on any failed spec. The binaries are built when they
// are missing: a build failure is a test failure, not a skip.
func TestSmoke(t *testing.T) {
	start := time.Now()
	ctx, bin, images := smokeSetup(t)
	t.Logf("binaries and images ready in %s", time.Since(start).Round(time.Second))

	var log strings.Builder
	c, err := StartCluster(ctx, ClusterOptions{
		Agent: AgentNodelet, NodeName: "smoke", BinDir: bin, Images: images, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, c.Stop, Leftovers(c))
	t.Log(log.String())

	focus := SmokeFocus
	if utils.IsContainerd2() {
		focus = append(slices.Clone(focus), ImageVolumeSmokeFocus)
	}
	if out, ok := runSmoke(ctx, t, bin, c.Kubeconfig, 1, "SmokeFocus", focus); !ok {
		t.Logf("suite output:\n%s\nnodelet log:\n%s", out, c.Nodelet.LogTail(80))
	}
}

// networkSmokeNodes is the size of TestNetworkSmoke's cluster: two nodes
// make every pod-to-pod and Service check cross a node.
const networkSmokeNodes = 2

// networkSmokeEnv turns TestNetworkSmoke on. It is off in make test: its
// cluster takes the machine's routes to the cluster CIDR, which another
// cluster of the harness running at the same time also needs.
const networkSmokeEnv = "NODELET_NETWORK_SMOKE"

// TestNetworkSmoke runs NetworkSmokeFocus, a few sig-network specs, on a
// multi-node nodelet cluster with kube-proxy and CoreDNS, and fails on
// any failed spec.
func TestNetworkSmoke(t *testing.T) {
	if os.Getenv(networkSmokeEnv) != "1" {
		t.Skipf("set %s=1 (make conformance-network-smoke) to run it", networkSmokeEnv)
	}
	ctx, bin, images := smokeSetup(t)
	start := time.Now()
	var log strings.Builder
	c, err := StartMultiNodeCluster(ctx, MultiNodeOptions{
		Agent: AgentNodelet, Nodes: networkSmokeNodes, BinDir: bin, Images: images, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, c.Stop, c.Leftovers())
	t.Logf("%scluster ready in %s", log.String(), time.Since(start).Round(time.Second))

	if out, ok := runSmoke(ctx, t, bin, c.Kubeconfig, networkSmokeNodes, "NetworkSmokeFocus", NetworkSmokeFocus); !ok {
		t.Logf("suite output:\n%s", out)
		for _, n := range c.Nodes {
			if n.Nodelet != nil {
				t.Logf("nodelet log of %s:\n%s", n.Name, n.Nodelet.LogTail(40))
			}
		}
	}
	t.Logf("network smoke done in %s", time.Since(start).Round(time.Second))
}

// smokeSetup builds (when missing) the binaries a smoke run needs and the
// images its cluster imports: a build failure is a test failure, not a
// skip.
func smokeSetup(t *testing.T) (context.Context, string, map[string]string) {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	bin, err := Binaries(ctx, os.Stderr, E2ETestBinary, GinkgoBinary, AgnhostBinary)
	if err != nil {
		t.Fatal(err)
	}
	images, err := ImageArchives(ctx, filepath.Join(bin, AgnhostBinary))
	if err != nil {
		t.Fatal(err)
	}
	return ctx, bin, images
}

// stopOnCleanup stops a smoke cluster when the test ends and fails the
// test when anything it made is left behind.
func stopOnCleanup(t *testing.T, stop func() error, left func() string) {
	t.Helper()
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
		if l := left(); l != "" {
			t.Errorf("left behind after the cluster stopped: %s", l)
		}
	})
}

// runSmoke runs the specs of focus (named focusName in messages) against
// kubeconfig's cluster of nodes nodes and fails t on a spec that failed or did not run.
// It returns the tail of the suite's output and whether all passed.
func runSmoke(ctx context.Context, t *testing.T, bin, kubeconfig string, nodes int, focusName string, focus []string) (string, bool) {
	t.Helper()
	runCtx, cancel := context.WithTimeout(ctx, smokeTimeout)
	defer cancel()
	var out strings.Builder
	r, err := Run(runCtx, RunOptions{
		BinDir: bin, Kubeconfig: kubeconfig, Nodes: nodes, Focus: focus, Procs: 2,
		ReportDir: t.TempDir(), Timeout: smokeTimeout, Output: &out,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, utils.LastBytes(out.String(), 8192))
	}
	ok := true
	if got := r.Count(Passed) + r.Count(Failed); got != len(focus) {
		t.Errorf("ran %d specs, want the %d of %s (a spec was renamed?): %v", got, len(focus), focusName, r.Names(Passed))
		ok = false
	}
	for _, name := range r.Names(Failed) {
		t.Errorf("FAILED %s\n%s", name, r.Specs[name].Message)
		ok = false
	}
	return utils.LastBytes(out.String(), 16384), ok
}
