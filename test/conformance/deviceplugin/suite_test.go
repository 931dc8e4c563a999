package deviceplugin

import (
	"flag"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

var environmentPath = flag.String("environment", "", "the harness's Environment (JSON); the specs skip without it")

var (
	// env is the cluster the specs run on.
	env Environment
	// clientSet is the cluster admin's client.
	clientSet kubernetes.Interface
)

// TestDevicePlugin runs the specs against the cluster -environment
// describes; without it (a plain go test) it skips.
func TestDevicePlugin(t *testing.T) {
	if *environmentPath == "" {
		t.Skip("no -environment: the harness runs these specs on a cluster of its own (make conformance-deviceplugin)")
	}
	var err error
	if env, err = ReadEnvironment(*environmentPath); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatalf("loading the kubeconfig: %v", err)
	}
	// The specs poll the Node and their pods every two seconds.
	cfg.QPS, cfg.Burst = 50, 100
	if clientSet, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatalf("creating the client: %v", err)
	}
	klog.SetLogger(GinkgoLogr)
	RegisterFailHandler(Fail)
	RunSpecs(t, "device plugin and pod resources specs")
}
