// Command localup runs nodelet on this machine with nothing but what the
// project installs: a private containerd, a local API server (etcd and
// kube-apiserver, authorizing the agent as its node), and nodelet itself,
// then starts a demo pod. It prints how to reach the API server with kubectl
// and runs until interrupted (or for $RUN_FOR, e.g. RUN_FOR=2m).
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/test/utils"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localup:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if d := os.Getenv("RUN_FOR"); d != "" {
		dur, err := time.ParseDuration(d)
		if err != nil {
			return fmt.Errorf("RUN_FOR: %w", err)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dur)
		defer cancel()
	}
	node := v1alpha1.DefaultNodeName()

	step("starting a private containerd")
	ctrd, err := utils.StartContainerd(ctx, utils.ContainerdOptions{})
	if err != nil {
		return err
	}
	defer func() { warnIf("stopping containerd", ctrd.Stop()) }()
	step("starting etcd and kube-apiserver (Node,RBAC authorization, NodeRestriction)")
	api, err := utils.StartAPIServer(ctx)
	if err != nil {
		return err
	}
	defer func() { warnIf("stopping the API server", api.Stop()) }()
	root, err := utils.RepoRoot()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(root, "bin", "admin.kubeconfig")
	if err := utils.WriteKubeconfig(kubeconfig, api.Config, "admin"); err != nil {
		return err
	}

	step("starting nodelet for node " + node)
	n, err := utils.StartNodelet(ctx, utils.NodeletOptions{NodeName: node, API: api, Containerd: ctrd})
	if err != nil {
		return err
	}
	defer func() { warnIf("stopping nodelet", n.Cleanup()) }()

	admin, err := api.AdminClient()
	if err != nil {
		return err
	}
	step("starting the demo pod (config/samples/demo-pod.yaml)")
	if err := startDemo(ctx, admin, root, node); err != nil {
		return fmt.Errorf("%w\nnodelet log:\n%s", err, n.LogTail(40))
	}
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	show(kubectl, kubeconfig, "get", "nodes", "-o", "wide")
	show(kubectl, kubeconfig, "get", "pods", "-A", "-o", "wide")
	fmt.Printf(`
nodelet is running (log: %s).
Try:
  export KUBECONFIG=%s
  %s get nodes,pods -A
  %s describe pod -n demo hello
Stop with Ctrl-C.
`, n.LogPath, kubeconfig, kubectl, kubectl)
	<-ctx.Done()
	step("stopping")
	return nil
}

func startDemo(ctx context.Context, c client.Client, root, node string) error {
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "demo-pod.yaml"))
	if err != nil {
		return err
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(string(data), "NODE_NAME", node)), pod); err != nil {
		return fmt.Errorf("reading the demo pod: %w", err)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: pod.Namespace}},
		pod,
	} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err == nil && pod.Status.Phase == corev1.PodRunning {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the demo pod is %s, not Running, after a minute", pod.Status.Phase)
}

func step(msg string) { fmt.Printf("==> %s\n", msg) }

func show(kubectl, kubeconfig string, args ...string) {
	fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	_ = cmd.Run()
}

// warnIf prints a clean-up error; the run is over, so it is all there is to do.
func warnIf(what string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "localup: %s: %v\n", what, err)
	}
}
