package cri

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	eventtypes "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// eventServer is containerd's event service, made of its own generated
// API: Subscribe records the filters, sends envelopes, then ends the
// stream with end.
type eventServer struct {
	eventsapi.UnimplementedEventsServer
	filters   chan []string
	envelopes []*types.Envelope
	end       error
}

func (s *eventServer) Subscribe(req *eventsapi.SubscribeRequest, srv eventsapi.Events_SubscribeServer) error {
	s.filters <- req.GetFilters()
	for _, e := range s.envelopes {
		if err := srv.Send(e); err != nil {
			return err
		}
	}
	return s.end
}

func (s *eventServer) Publish(context.Context, *eventsapi.PublishRequest) (*emptypb.Empty, error) {
	return nil, status.Error(codes.Unimplemented, "not here")
}

// versionServer is containerd's version service.
type versionServer struct {
	versionapi.UnimplementedVersionServer
}

func (versionServer) Version(context.Context, *emptypb.Empty) (*versionapi.VersionResponse, error) {
	return &versionapi.VersionResponse{Version: "1.6.20", Revision: "test"}, nil
}

// registerContainerd serves events as containerd's event service, beside
// its version service.
func registerContainerd(events eventsapi.EventsServer) func(*grpc.Server) {
	return func(gs *grpc.Server) {
		eventsapi.RegisterEventsServer(gs, events)
		versionapi.RegisterVersionServer(gs, versionServer{})
	}
}

func envelopeOf(t *testing.T, namespace, topic string, ev proto.Message) *types.Envelope {
	t.Helper()
	a, err := anypb.New(ev)
	if err != nil {
		t.Fatal(err)
	}
	return &types.Envelope{Namespace: namespace, Topic: topic, Event: a}
}

// serveEvents serves register's services on a unix socket and returns a
// connection to it.
func serveEvents(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestWatchChangesReportsContainerExitsAndRemovalsOfTheCRINamespace(t *testing.T) {
	srv := &eventServer{
		filters: make(chan []string, 1),
		envelopes: []*types.Envelope{
			// An exec probe's process exits: nothing a relist sees.
			envelopeOf(t, "k8s.io", "/tasks/exit", &eventtypes.TaskExit{ContainerID: "c1", ID: "exec-1", ExitStatus: 0}),
			// The container's own process exits.
			envelopeOf(t, "k8s.io", "/tasks/exit", &eventtypes.TaskExit{ContainerID: "c1", ID: "c1", ExitStatus: 3}),
			// Another namespace's (a runtime that ignores the filter).
			envelopeOf(t, "moby", "/tasks/exit", &eventtypes.TaskExit{ContainerID: "d1", ID: "d1"}),
			envelopeOf(t, "k8s.io", "/tasks/oom", &eventtypes.TaskOOM{ContainerID: "c2"}),
			envelopeOf(t, "k8s.io", "/containers/delete", &eventtypes.ContainerDelete{ID: "c3"}),
		},
		end: status.Error(codes.Unavailable, "containerd is stopping"),
	}
	conn := serveEvents(t, registerContainerd(srv))

	subscribed, changes := 0, 0
	err := watchChanges(context.Background(), conn, func() { subscribed++ }, func() { changes++ })
	if status.Code(errors.Unwrap(err)) != codes.Unavailable || errors.Is(err, ErrNoEvents) {
		t.Errorf("WatchChanges returned %v, want the stream's Unavailable", err)
	}
	if subscribed != 1 || changes != 3 {
		t.Errorf("subscribed %d times, %d changes; want 1 and 3 (the container's exit, the OOM kill, the removal)", subscribed, changes)
	}
	filters := <-srv.filters
	want := []string{
		`namespace==k8s.io,topic=="/tasks/exit"`,
		`namespace==k8s.io,topic=="/tasks/oom"`,
		`namespace==k8s.io,topic=="/containers/delete"`,
	}
	if !slices.Equal(filters, want) {
		t.Errorf("filters sent %q, want %q", filters, want)
	}
}

func TestWatchChangesStopsWithItsContext(t *testing.T) {
	srv := &eventServer{filters: make(chan []string, 1)}
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	conn := serveEvents(t, registerContainerd(&blockingEvents{eventServer: srv, block: block}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	subscribed := make(chan struct{})
	go func() { done <- watchChanges(ctx, conn, func() { close(subscribed) }, func() {}) }()
	<-subscribed
	<-srv.filters
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) && status.Code(errors.Unwrap(err)) != codes.Canceled {
			t.Errorf("WatchChanges returned %v after its context ended, want canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchChanges did not return when its context ended")
	}
}

// blockingEvents subscribes and sends nothing until block is closed.
type blockingEvents struct {
	*eventServer
	block chan struct{}
}

func (b *blockingEvents) Subscribe(req *eventsapi.SubscribeRequest, srv eventsapi.Events_SubscribeServer) error {
	b.filters <- req.GetFilters()
	select {
	case <-b.block:
	case <-srv.Context().Done():
	}
	return nil
}

func TestWatchChangesWithoutContainerdsEventsIsUnsupported(t *testing.T) {
	// A CRI runtime that is not containerd: no event service, no version
	// service; it never looks subscribed.
	conn := serveEvents(t, func(*grpc.Server) {})
	err := watchChanges(context.Background(), conn, func() { t.Error("subscribed") }, func() { t.Error("a change reported") })
	if !errors.Is(err, ErrNoEvents) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("WatchChanges returned %v, want ErrNoEvents (errors.ErrUnsupported)", err)
	}
	// Nor has a client that is not on a unix socket.
	if err := (&Client{}).WatchChanges(context.Background(), func() {}, func() {}); !errors.Is(err, ErrNoEvents) {
		t.Errorf("WatchChanges without a brief connection returned %v, want ErrNoEvents", err)
	}
}

func TestEnvelopeDecodeRejectsMalformedBytes(t *testing.T) {
	var e envelope
	if err := e.decode([]byte{0x1a, 0x05, 'a'}); err == nil {
		t.Error("decoded a truncated envelope")
	}
}
