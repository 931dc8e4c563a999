// Command csi-registrar registers a CSI driver with a node agent through
// the kubelet's plugin registration API, with the flags of
// node-driver-registrar: it serves <plugin-registration-path>/<driver>-reg.sock
// (and, with --http-endpoint, /healthz) until SIGTERM, and exits non-zero
// when the node agent reports that the registration failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/test/csi/registrar"
)

func main() {
	klog.InitFlags(nil)
	csiAddress := flag.String("csi-address", "/run/csi/socket", "path of the CSI driver's socket, as this process reaches it")
	kubeletPath := flag.String("kubelet-registration-path", "", "path of the CSI driver's socket, as the node agent reaches it")
	registrationPath := flag.String("plugin-registration-path", "/registration", "directory the node agent watches for registration sockets")
	timeout := flag.Duration("timeout", time.Second, "timeout of each call to the CSI driver")
	httpEndpoint := flag.String("http-endpoint", "", "address to serve /healthz on, [host]:port; none when empty")
	flag.Parse()
	if *kubeletPath == "" {
		klog.ErrorS(nil, "--kubelet-registration-path is required")
		os.Exit(1)
	}

	if err := run(*csiAddress, *kubeletPath, *registrationPath, *httpEndpoint, *timeout); err != nil {
		klog.ErrorS(err, "Registration failed")
		os.Exit(1)
	}
}

func run(csiAddress, kubeletPath, registrationPath, httpEndpoint string, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var health registrar.Health
	if httpEndpoint != "" {
		lis, err := net.Listen("tcp", httpEndpoint)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", httpEndpoint, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/healthz", &health)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		defer func() { _ = srv.Close() }()
	}
	name, err := registrar.DriverName(ctx, csiAddress, timeout)
	if err != nil {
		return err
	}
	health.Serving(filepath.Join(registrationPath, registrar.SocketName(name)))
	return registrar.NewServer(name, kubeletPath).Serve(ctx, registrationPath)
}
