// Command csi-hostpath is the test CSI driver of package
// test/csi/hostpath: volumes are directories under --statedir on the one
// node it serves, published with bind mounts.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/test/csi/hostpath"
)

func main() {
	var cfg hostpath.Config
	klog.InitFlags(nil)
	flag.StringVar(&cfg.Endpoint, "endpoint", "unix:///csi/csi.sock", "CSI endpoint to serve on")
	flag.StringVar(&cfg.DriverName, "drivername", hostpath.DefaultDriverName, "name of the driver")
	flag.StringVar(&cfg.NodeID, "nodeid", "", "id of this node")
	flag.StringVar(&cfg.StateDir, "statedir", "/csi-data-dir", "directory that holds the volumes and the driver's records")
	flag.Int64Var(&cfg.MaxVolumesPerNode, "max-volumes-per-node", 0, "volumes a node can have attached, 0 for no limit")
	flag.BoolVar(&cfg.AttachRequired, "attach-required", false, "serve ControllerPublishVolume and ControllerUnpublishVolume")
	flag.StringVar(&cfg.CallLog, "call-log", "", "file to append a JSON line per CSI call to")
	flag.Parse()

	if err := run(cfg); err != nil {
		klog.ErrorS(err, "Driver failed")
		os.Exit(1)
	}
}

func run(cfg hostpath.Config) error {
	d, err := hostpath.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return d.Run(ctx)
}
