//go:build ignore

// Command csi-mock-driver stands in for csi-driver-host-path's
// hostpathplugin in its mock mode, the "mock" container of Kubernetes' CSI
// mock specs that do not embed the driver in e2e.test: it serves
// Kubernetes' own e2e mock CSI service
// (k8s.io/kubernetes/test/e2e/storage/drivers/csi-test, the driver e2e.test
// embeds in its other specs) on --endpoint, configured by hostpathplugin's
// mock flags, and logs every call as a "gRPCCall: <json>" line, which
// e2e.test reads back from the container's log. Inline ephemeral volumes,
// which that service does not serve (its NodePublishVolume dereferences
// the volume it did not find), are published here as hostpathplugin does:
// an empty directory at the target path.
//
// It imports k8s.io/kubernetes, which this module does not require, so it
// is built by the conformance harness in a module that does
// (test/conformance StorageImageArchives); hence the ignore constraint.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"
	mockdriver "k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/driver"
	mockservice "k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

// callPrefix starts the log line of each call (e2e.test's grpcCallPrefix).
const callPrefix = "gRPCCall:"

func main() {
	klog.InitFlags(nil)
	var cfg mockservice.Config
	endpoint := flag.String("endpoint", "/csi/csi.sock", "CSI endpoint to serve on: a path or unix://path")
	enableAttach := flag.Bool("enable-attach", false, "serve ControllerPublishVolume")
	flag.StringVar(&cfg.DriverName, "drivername", mockservice.Name, "name of the driver")
	flag.Int64Var(&cfg.AttachLimit, "attach-limit", 0, "volumes a node can have attached, 0 for no limit")
	flag.BoolVar(&cfg.NodeExpansionRequired, "node-expand-required", false, "report NodeExpandVolume as needed")
	flag.BoolVar(&cfg.EnableTopology, "enable-topology", false, "report an accessible topology")
	flag.BoolVar(&cfg.DisableControllerExpansion, "disable-controller-expansion", false, "do not report controller expansion")
	flag.BoolVar(&cfg.DisableOnlineExpansion, "disable-online-expansion", false, "do not report online expansion")
	flag.BoolVar(&cfg.PermissiveTargetPath, "permissive-target-path", false, "accept a target path that exists already")
	// hostpathplugin's flags the manifests pass that the mock does not use.
	flag.String("nodeid", "", "ignored: the mock's node id is its driver name")
	flag.String("statedir", "", "ignored")
	flag.Parse()
	cfg.DisableAttach = !*enableAttach

	if err := run(*endpoint, cfg); err != nil {
		klog.ErrorS(err, "Mock CSI driver failed")
		os.Exit(1)
	}
}

func run(endpoint string, cfg mockservice.Config) error {
	socket := strings.TrimPrefix(strings.TrimPrefix(endpoint, "unix://"), "unix:")
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing a stale socket: %w", err)
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", socket, err)
	}
	s := mockservice.New(cfg)
	d := mockdriver.NewCSIDriver(&mockdriver.CSIDriverServers{Controller: s, Identity: s, Node: s})
	eph := &ephemeralVolumes{targets: map[string]string{}}
	serve := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return logCall(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			if resp, ok, err := eph.serve(req); ok {
				return resp, err
			}
			return handler(ctx, withDevice(req))
		})
	}
	if err := d.Start(l, serve); err != nil {
		return fmt.Errorf("starting the mock driver: %w", err)
	}
	klog.InfoS("Serving the mock CSI driver", "driver", cfg.DriverName, "endpoint", socket)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	d.Stop()
	_ = os.Remove(socket)
	return nil
}

// ephemeralVolumes publishes inline ephemeral volumes: volume id → target.
type ephemeralVolumes struct {
	mu      sync.Mutex
	targets map[string]string
}

// serve answers NodePublishVolume of an ephemeral volume and its
// NodeUnpublishVolume; ok is false for every other call.
func (e *ephemeralVolumes) serve(req any) (resp any, ok bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch r := req.(type) {
	case *csi.NodePublishVolumeRequest:
		if r.GetVolumeContext()["csi.storage.k8s.io/ephemeral"] != "true" {
			return nil, false, nil
		}
		if r.GetVolumeId() == "" || r.GetTargetPath() == "" {
			return nil, true, status.Error(codes.InvalidArgument, "volume id and target path are required")
		}
		if err := os.Mkdir(r.GetTargetPath(), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, true, status.Error(codes.Internal, err.Error())
		}
		e.targets[r.GetVolumeId()] = r.GetTargetPath()
		return &csi.NodePublishVolumeResponse{}, true, nil
	case *csi.NodeUnpublishVolumeRequest:
		target, known := e.targets[r.GetVolumeId()]
		if !known {
			return nil, false, nil
		}
		if err := os.RemoveAll(target); err != nil {
			return nil, true, status.Error(codes.Internal, err.Error())
		}
		delete(e.targets, r.GetVolumeId())
		return &csi.NodeUnpublishVolumeResponse{}, true, nil
	}
	return nil, false, nil
}

// withDevice returns a NodeStageVolume or NodePublishVolume request whose
// publish context lacks "device" as a copy with one: the e2e mock service
// refuses such a request when attaching is enabled, where hostpathplugin,
// whose mock flags are served here, stages and publishes without one (a
// volume of a driver whose CSIDriver says no attach is needed never gets
// one). The call log keeps the request as it came.
func withDevice(req any) any {
	var pc map[string]string
	switch r := req.(type) {
	case *csi.NodeStageVolumeRequest:
		pc = r.GetPublishContext()
	case *csi.NodePublishVolumeRequest:
		pc = r.GetPublishContext()
	default:
		return req
	}
	if _, ok := pc["device"]; ok {
		return req
	}
	c := proto.Clone(req.(proto.Message))
	with := map[string]string{"device": "mock device"}
	for k, v := range pc {
		with[k] = v
	}
	switch r := c.(type) {
	case *csi.NodeStageVolumeRequest:
		r.PublishContext = with
	case *csi.NodePublishVolumeRequest:
		r.PublishContext = with
	}
	return c
}

// logCall serves a call and logs it, with its answer, as one line.
func logCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	line := struct {
		Method    string
		Request   any
		Response  any
		Error     string
		FullError *spb.Status
	}{Method: info.FullMethod, Request: req, Response: resp}
	if err != nil {
		line.Error = err.Error()
		line.FullError = status.Convert(err).Proto()
	}
	msg, _ := json.Marshal(line)
	klog.Infof("%s %s", callPrefix, msg)
	return resp, err
}
