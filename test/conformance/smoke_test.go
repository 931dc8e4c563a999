package conformance

import (
	"context"
	"os"
	"path/filepath"
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
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	start := time.Now()
	bin, err := Binaries(ctx, os.Stderr, E2ETestBinary, GinkgoBinary, AgnhostBinary)
	if err != nil {
		t.Fatal(err)
	}
	images, err := ImageArchives(ctx, filepath.Join(bin, AgnhostBinary))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("binaries and images ready in %s", time.Since(start).Round(time.Second))

	var log strings.Builder
	c, err := StartCluster(ctx, ClusterOptions{
		Agent: AgentNodelet, NodeName: "smoke", BinDir: bin, Images: images, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	left := Leftovers(c)
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		if l := left(); l != "" {
			t.Errorf("left behind after the cluster stopped: %s", l)
		}
	})
	t.Log(log.String())

	runCtx, cancel := context.WithTimeout(ctx, smokeTimeout)
	defer cancel()
	var out strings.Builder
	r, err := Run(runCtx, RunOptions{
		BinDir: bin, Kubeconfig: c.Kubeconfig, Focus: SmokeFocus, Procs: 2,
		ReportDir: t.TempDir(), Timeout: smokeTimeout, Output: &out,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, utils.LastBytes(out.String(), 8192))
	}
	if got := r.Count(Passed) + r.Count(Failed); got != len(SmokeFocus) {
		t.Errorf("ran %d specs, want the %d of SmokeFocus (a spec was renamed?): %v", got, len(SmokeFocus), r.Names(Passed))
	}
	for _, name := range r.Names(Failed) {
		t.Errorf("FAILED %s\n%s", name, r.Specs[name].Message)
	}
	if t.Failed() {
		t.Logf("suite output:\n%s\nnodelet log:\n%s", utils.LastBytes(out.String(), 16384), c.Nodelet.LogTail(80))
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
	start := time.Now()
	var log strings.Builder
	c, err := StartMultiNodeCluster(ctx, MultiNodeOptions{
		Agent: AgentNodelet, Nodes: networkSmokeNodes, BinDir: bin, Images: images, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	left := c.Leftovers()
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		if l := left(); l != "" {
			t.Errorf("left behind after the cluster stopped: %s", l)
		}
	})
	t.Logf("%scluster ready in %s", log.String(), time.Since(start).Round(time.Second))

	runCtx, cancel := context.WithTimeout(ctx, smokeTimeout)
	defer cancel()
	var out strings.Builder
	r, err := Run(runCtx, RunOptions{
		BinDir: bin, Kubeconfig: c.Kubeconfig, Focus: NetworkSmokeFocus, Procs: 2,
		ReportDir: t.TempDir(), Timeout: smokeTimeout, Output: &out,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, utils.LastBytes(out.String(), 8192))
	}
	if got := r.Count(Passed) + r.Count(Failed); got != len(NetworkSmokeFocus) {
		t.Errorf("ran %d specs, want the %d of NetworkSmokeFocus (a spec was renamed?): %v", got, len(NetworkSmokeFocus), r.Names(Passed))
	}
	for _, name := range r.Names(Failed) {
		t.Errorf("FAILED %s\n%s", name, r.Specs[name].Message)
	}
	if t.Failed() {
		t.Logf("suite output:\n%s", utils.LastBytes(out.String(), 16384))
		for _, n := range c.Nodes {
			if n.Nodelet != nil {
				t.Logf("nodelet log of %s:\n%s", n.Name, n.Nodelet.LogTail(40))
			}
		}
	}
	t.Logf("network smoke done in %s", time.Since(start).Round(time.Second))
}
