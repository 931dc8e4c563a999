// Command localup runs a small Kubernetes cluster on this machine with
// nothing but what the project installs and builds, with nodelet as its
// node agent: etcd and kube-apiserver (Node,RBAC authorization,
// NodeRestriction and ServiceAccount admission, bootstrap tokens),
// kube-controller-manager, kube-scheduler, a private containerd, and nodelet
// joining by TLS bootstrap. It applies the demo in config/samples/demo.yaml,
// waits for it, prints how to use the cluster with kubectl, and runs until
// interrupted (or for $RUN_FOR, e.g. RUN_FOR=2m), then stops everything.
// With $NODES above 1 the cluster has that many nodes, each a network
// namespace with its own containerd and nodelet (utils.StartCluster).
//
// What a run starts is recorded in its state directory ($LOCALUP_DIR, by
// default bin/localup in the repository), so that `localup down` (make
// run-down) stops a run that is still going and cleans up after one that
// was killed: processes, mounts, the pod bridge and directories.
//
// make run builds it and runs it as root; KUBEBUILDER_ASSETS names the
// directory of the Kubernetes binaries (hack/envtest.sh).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "localup:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	dir, err := stateDirPath()
	if err != nil {
		return err
	}
	switch {
	case len(args) == 0 || args[0] == "up":
		runFor, err := runDuration()
		if err != nil {
			return err
		}
		return up(ctx, dir, runFor)
	case args[0] == "down":
		return down(dir)
	default:
		return fmt.Errorf("unknown command %q (want up or down)", args[0])
	}
}

// runDuration reads $RUN_FOR; 0 means until interrupted.
func runDuration() (time.Duration, error) {
	v := os.Getenv("RUN_FOR")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("parsing RUN_FOR: %w", err)
	}
	return d, nil
}

// step prints a progress line.
func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

// timed prints a progress line, runs fn and prints how long it took.
func timed(what string, fn func() error) error {
	step("%s", what)
	start := time.Now()
	if err := fn(); err != nil {
		return err
	}
	fmt.Printf("    done in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}
