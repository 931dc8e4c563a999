package proxy

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in      string
		want    Endpoint
		wantErr bool
	}{
		{in: "/csi/csi.sock", want: Endpoint{"unix", "/csi/csi.sock"}},
		{in: "unix:///csi/csi.sock", want: Endpoint{"unix", "/csi/csi.sock"}},
		{in: "unix:/csi/csi.sock", want: Endpoint{"unix", "/csi/csi.sock"}},
		{in: "tcp://:9000", want: Endpoint{"tcp", ":9000"}},
		{in: "tcp://127.0.0.1:9000", want: Endpoint{"tcp", "127.0.0.1:9000"}},
		{in: "", wantErr: true},
		{in: "tcp://", wantErr: true},
		{in: "unix://", wantErr: true},
		{in: "http://x:1", wantErr: true},
		{in: "csi.sock", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseEndpoint(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseEndpoint(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseEndpoint(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// identity is a CSI identity service with a name.
type identity struct {
	csi.UnimplementedIdentityServer
	name string
}

func (i identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: "1"}, nil
}

// dialedListener accepts connections the test dialed itself, the way
// e2e.test's port-forward listener hands its gRPC server the streams it
// opened to the proxy's TCP port.
type dialedListener struct {
	conns chan net.Conn
	done  chan struct{}
}

func (l *dialedListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errors.New("closed")
	}
}
func (l *dialedListener) Close() error   { close(l.done); return nil }
func (l *dialedListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestServeForwardsGRPC runs a CSI call from a client on the Unix socket to
// a driver that reached the proxy by dialing its TCP port beforehand.
func TestServeForwardsGRPC(t *testing.T) {
	socket, err := Listen(Endpoint{"unix", filepath.Join(t.TempDir(), "csi.sock")})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := Listen(Endpoint{"tcp", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, socket, tcp) }()

	// The driver side: two connections dialed ahead of any client, as
	// e2e.test keeps several open.
	drv := &dialedListener{conns: make(chan net.Conn, 2), done: make(chan struct{})}
	var dialed []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		dialed = append(dialed, c)
		drv.conns <- c
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, identity{name: "mock.example.com"})
	go func() { _ = srv.Serve(drv) }()
	// The connections first: the server's Stop waits for their handshakes.
	defer func() {
		cancel()
		for _, c := range dialed {
			_ = c.Close()
		}
		srv.Stop()
	}()

	for i := range 2 {
		conn, err := grpc.NewClient("unix://"+socket.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		callCtx, callCancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := csi.NewIdentityClient(conn).GetPluginInfo(callCtx, &csi.GetPluginInfoRequest{})
		callCancel()
		_ = conn.Close()
		if err != nil {
			t.Fatalf("call %d: GetPluginInfo through the proxy: %v", i, err)
		}
		if info.GetName() != "mock.example.com" {
			t.Fatalf("call %d: name %q, want mock.example.com", i, info.GetName())
		}
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestRequested(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{args: []string{"-v=5", "-nodeid=n", "-endpoint=/csi/csi.sock", "-proxy-endpoint=tcp://:9000"}, want: true},
		{args: []string{"--proxy-endpoint", "tcp://:9000"}, want: true},
		{args: []string{"--proxy-endpoint="}},
		{args: []string{"--drivername=csi-mock-x", "--nodeid=n", "--endpoint=/csi/csi.sock", "--enable-attach"}},
		{args: []string{"--", "--proxy-endpoint=tcp://:9000"}},
		{args: []string{"--proxy-endpoint-other=tcp://:9000"}},
		{},
	}
	for _, tt := range tests {
		if got := Requested(tt.args); got != tt.want {
			t.Errorf("Requested(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}
