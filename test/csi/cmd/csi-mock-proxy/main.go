// Command csi-mock-proxy stands in for hostpathplugin (csi-driver-host-path)
// in its proxy mode, the "mock" container of Kubernetes' CSI mock specs: it
// serves --endpoint, the CSI socket the node agent and the sidecars dial,
// and forwards each connection to one accepted on --proxy-endpoint, where
// e2e.test's embedded mock driver connects through port-forward. Without
// --proxy-endpoint, hostpathplugin's mock mode, it runs the mock driver
// next to it instead (csi-mock-driver, mockDriver), with the same
// arguments.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/test/csi/proxy"
)

// mockDriver is where the image holds csi-mock-driver.
const mockDriver = "/csi-mock-driver"

func main() {
	if !proxy.Requested(os.Args[1:]) {
		err := syscall.Exec(mockDriver, append([]string{mockDriver}, os.Args[1:]...), os.Environ())
		klog.ErrorS(err, "Running the mock driver", "path", mockDriver)
		os.Exit(1)
	}
	klog.InitFlags(nil)
	endpoint := flag.String("endpoint", "unix:///csi/csi.sock", "CSI endpoint to serve on")
	proxyEndpoint := flag.String("proxy-endpoint", "", "TCP endpoint the CSI driver connects to, tcp://[host]:port")
	// hostpathplugin's flags that the manifests pass and a proxy does not use.
	flag.String("nodeid", "", "ignored")
	flag.String("drivername", "", "ignored")
	flag.String("statedir", "", "ignored")
	flag.Parse()

	if err := run(*endpoint, *proxyEndpoint); err != nil {
		klog.ErrorS(err, "Proxy failed")
		os.Exit(1)
	}
}

func run(endpoint, proxyEndpoint string) error {
	ep, err := proxy.ParseEndpoint(endpoint)
	if err != nil {
		return err
	}
	pep, err := proxy.ParseEndpoint(proxyEndpoint)
	if err != nil {
		return err
	}
	socket, err := proxy.Listen(ep)
	if err != nil {
		return err
	}
	tcp, err := proxy.Listen(pep)
	if err != nil {
		_ = socket.Close()
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	klog.InfoS("Forwarding CSI", "endpoint", socket.Addr(), "proxyEndpoint", tcp.Addr())
	return proxy.Serve(ctx, socket, tcp)
}
