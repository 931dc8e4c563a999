package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nodelet/nodelet/test/utils"
)

const (
	// demoManifest is applied with kubectl, relative to the repository.
	demoManifest = "config/samples/demo.yaml"
	// demoTimeout bounds the rollout of the demo Deployment and the Job.
	demoTimeout = "3m"
)

// demo applies and waits for the demo workloads with kubectl, as a user
// would, showing each command and its output.
type demo struct {
	c *cluster
}

func (d *demo) run(ctx context.Context) error {
	root, err := utils.RepoRoot()
	if err != nil {
		return err
	}
	manifest := filepath.Join(root, demoManifest)
	if err := timed("applying the demo ("+demoManifest+")", func() error {
		return d.kubectl(ctx, "apply", "-f", manifest)
	}); err != nil {
		return err
	}
	if err := timed("waiting for the demo Deployment to roll out", func() error {
		return d.kubectl(ctx, "-n", "demo", "rollout", "status", "deployment/demo", "--timeout="+demoTimeout)
	}); err != nil {
		return d.explain(ctx, err)
	}
	if err := timed("waiting for the demo Job to complete", func() error {
		return d.kubectl(ctx, "-n", "demo", "wait", "--for=condition=complete", "job/demo-count", "--timeout="+demoTimeout)
	}); err != nil {
		return d.explain(ctx, err)
	}
	return d.kubectl(ctx, "-n", "demo", "get", "pods", "-o", "wide")
}

// kubectl runs kubectl on the cluster, echoing the command line.
func (d *demo) kubectl(ctx context.Context, args ...string) error {
	fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, filepath.Join(d.c.assets, "kubectl"), append([]string{"--kubeconfig", d.c.st.kubeconfig()}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// explain adds what shows why the demo did not get going to err.
func (d *demo) explain(ctx context.Context, err error) error {
	_ = d.kubectl(ctx, "get", "pods", "-A", "-o", "wide")
	_ = d.kubectl(ctx, "-n", "demo", "get", "events", "--sort-by=.lastTimestamp")
	return fmt.Errorf("%w\n%s", err, d.c.nodeletLogs(30))
}

// printUsage tells how to use the cluster from another shell.
func printUsage(c *cluster) {
	if c.multi != nil {
		printMultiNodeUsage(c)
		return
	}
	fmt.Printf(`
A one-node cluster is running, with nodelet as node %[1]s. In another shell:

  export KUBECONFIG=%[2]s
  export PATH=%[3]s:$PATH    # kubectl %[4]s, built by hack/envtest.sh
  kubectl get nodes -o wide
  kubectl -n demo logs deployment/demo
  kubectl -n demo logs job/demo-count
  kubectl -n demo exec deployment/demo -- cat /www/greeting
  kubectl create deployment web --image=%[5]s --replicas=3
  kubectl rollout status deployment/web --timeout=2m
  kubectl logs deployment/web

Logs: nodelet %[6]s
      containerd %[7]s
%[8]sImages on the node: %[9]s (built here; there is no registry).
Stop with Ctrl-C, or with make run-down from another shell.
`, c.nodeName, c.st.kubeconfig(), c.assets, kubernetesVersion(c.assets), utils.WebImage,
		c.nodelet.LogPath, c.ctrd.LogPath(), controlPlaneUsage(c), strings.Join(images, ", "))
}

// controlPlaneUsage says where the control plane's logs are: its
// processes' files, or its static pods.
func controlPlaneUsage(c *cluster) string {
	if c.static != nil {
		return fmt.Sprintf(`      the control plane: kubectl -n kube-system logs <pod> (static pods of nodelet from %s)
`, c.static.ManifestDir)
	}
	return fmt.Sprintf(`      kube-controller-manager %s
      kube-scheduler %s
`, c.kcm.LogPath, c.sched.LogPath)
}

// kubernetesVersion is the version of the binaries' directory
// (…/k8s-<version>).
func kubernetesVersion(assets string) string {
	return strings.TrimPrefix(filepath.Base(assets), "k8s-")
}
