package registrar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// SupportedVersions are the CSI versions the registrar advertises.
var SupportedVersions = []string{"1.0.0"}

// SocketName is the registration socket's name for a driver.
func SocketName(driver string) string {
	return driver + "-reg.sock"
}

// DriverName asks the CSI driver at csiAddress (unix:///path or a path)
// for its name, retrying until ctx ends; each call is bounded by timeout.
func DriverName(ctx context.Context, csiAddress string, timeout time.Duration) (string, error) {
	target := csiAddress
	if filepath.IsAbs(target) {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", fmt.Errorf("connecting to the CSI driver at %s: %w", csiAddress, err)
	}
	defer func() { _ = conn.Close() }()
	client := csi.NewIdentityClient(conn)
	for {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		info, err := client.GetPluginInfo(callCtx, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil {
			if info.GetName() == "" {
				return "", errors.New("the CSI driver reports an empty name")
			}
			return info.GetName(), nil
		}
		klog.InfoS("Waiting for the CSI driver", "address", csiAddress, "err", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("asking the CSI driver at %s for its name: %w", csiAddress, err)
		case <-time.After(time.Second):
		}
	}
}

// Server is the registration service for one driver.
type Server struct {
	registerapi.UnimplementedRegistrationServer

	// DriverName and Endpoint are what GetInfo answers: the driver's name
	// and the socket the node agent reaches it on.
	DriverName string
	Endpoint   string
	// Failed gets the error of a registration the node agent reports as
	// failed; it is buffered by one.
	Failed chan error
}

// NewServer returns a registration service for driver at endpoint.
func NewServer(driver, endpoint string) *Server {
	return &Server{DriverName: driver, Endpoint: endpoint, Failed: make(chan error, 1)}
}

// GetInfo describes the CSI plugin.
func (s *Server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.InfoS("Received GetInfo call", "driver", s.DriverName)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.DriverName,
		Endpoint:          s.Endpoint,
		SupportedVersions: SupportedVersions,
	}, nil
}

// NotifyRegistrationStatus logs the outcome; a failure goes to Failed.
func (s *Server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	klog.InfoS("Received NotifyRegistrationStatus call", "driver", s.DriverName, "registered", st.GetPluginRegistered(), "error", st.GetError())
	if !st.GetPluginRegistered() {
		select {
		case s.Failed <- fmt.Errorf("registration of %s failed: %s", s.DriverName, st.GetError()):
		default:
		}
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Serve serves s on <dir>/<driver>-reg.sock until ctx ends or the node
// agent reports a failed registration (then it returns that error), and
// removes the socket before it returns.
func (s *Server) Serve(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating the registration directory: %w", err)
	}
	socket := filepath.Join(dir, SocketName(s.DriverName))
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing a stale registration socket: %w", err)
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", socket, err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, s)
	klog.InfoS("Serving the registration service", "driver", s.DriverName, "socket", socket, "endpoint", s.Endpoint)
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		err = nil
	case err = <-s.Failed:
	case err = <-errs:
		if err != nil {
			err = fmt.Errorf("serving the registration service: %w", err)
		}
	}
	// Graceful: the answer to a failed registration still goes out.
	srv.GracefulStop()
	if rerr := os.Remove(socket); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = fmt.Errorf("removing the registration socket: %w", rerr)
	}
	return err
}
