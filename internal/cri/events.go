package cri

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// ErrNoEvents is returned by WatchChanges when the runtime does not serve
// containerd's event service (CRI-O, a CRI endpoint that is not a unix
// socket): a relister then lists the runtime every period, as before.
// It wraps errors.ErrUnsupported.
var ErrNoEvents = fmt.Errorf("the runtime serves no containerd events: %w", errors.ErrUnsupported)

// The event and version services of containerd, on the same socket as its
// CRI plugin.
const (
	methodSubscribeEvents = "/containerd.services.events.v1.Events/Subscribe"
	methodVersion         = "/containerd.services.version.v1.Version/Version"
	// criNamespace is the containerd namespace of the CRI plugin's
	// sandboxes and containers.
	criNamespace = "k8s.io"

	topicTaskExit        = "/tasks/exit"
	topicTaskOOM         = "/tasks/oom"
	topicContainerDelete = "/containers/delete"
)

// changeFilters select the events that change what a relist sees and that
// nodelet's own calls do not already account for: a task that exits (a
// container, or a sandbox's pause process), an OOM kill, and a container
// removed by someone else. Filters are alternatives; the comma joins the
// conditions of one.
var changeFilters = [...]string{
	`namespace==` + criNamespace + `,topic=="` + topicTaskExit + `"`,
	`namespace==` + criNamespace + `,topic=="` + topicTaskOOM + `"`,
	`namespace==` + criNamespace + `,topic=="` + topicContainerDelete + `"`,
}

// subscribeRequest is containerd's SubscribeRequest with changeFilters:
// field 1, repeated string.
var subscribeRequest = func() encoded {
	var b []byte
	for _, f := range changeFilters {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, f)
	}
	return b
}()

// WatchChanges tells a relister when the runtime changed (it implements
// pleg.ChangeWatcher), over the client's brief connection (a unix socket):
// containerd serves its event service on the CRI socket. It calls
// subscribed once the subscription is sent, then changed for every change
// reported, until ctx ends or the stream fails, and returns why it
// stopped: an error wrapping ErrNoEvents when the runtime has no events to
// offer.
func (c *Client) WatchChanges(ctx context.Context, subscribed, changed func()) error {
	if c.brief == nil {
		return fmt.Errorf("watching the runtime's events: %w", ErrNoEvents)
	}
	return watchChanges(ctx, c.brief, subscribed, changed)
}

// watchChanges subscribes to the change events over conn and calls changed
// for each one that concerns a container's own process.
func watchChanges(ctx context.Context, conn grpc.ClientConnInterface, subscribed, changed func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// containerd answers nothing to a subscription before its first event,
	// so a runtime without the service would look subscribed until its
	// refusal came: ask its version first, which only containerd serves.
	if err := conn.Invoke(ctx, methodVersion, encoded(nil), &discarded{}, grpc.ForceCodecV2(eventCodec{})); err != nil {
		return eventsError(err)
	}
	desc := &grpc.StreamDesc{StreamName: "Subscribe", ServerStreams: true}
	stream, err := conn.NewStream(ctx, desc, methodSubscribeEvents, grpc.ForceCodecV2(eventCodec{}))
	if err != nil {
		return eventsError(err)
	}
	if err := stream.SendMsg(subscribeRequest); err != nil {
		return eventsError(err)
	}
	if err := stream.CloseSend(); err != nil {
		return eventsError(err)
	}
	// containerd sends nothing, not even headers, before the first event:
	// the request sent is the subscription. An unknown service or a
	// refused filter ends the stream at once.
	subscribed()
	for {
		var ev envelope
		if err := stream.RecvMsg(&ev); err != nil {
			return eventsError(err)
		}
		if ev.concernsContainer() {
			changed()
		}
	}
}

// eventsError wraps a stream's error, as ErrNoEvents when the runtime does
// not know the service.
func eventsError(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("watching the runtime's events: %w: %w", ErrNoEvents, err)
	}
	return fmt.Errorf("watching the runtime's events: %w", err)
}

// envelope is what a relister needs of containerd's event envelope
// (containerd.types.Envelope): its namespace, topic, and for a task's exit
// whether the process was the container's own (an exec's exit, an exec
// probe every few seconds, changes nothing a relist sees).
type envelope struct {
	namespace, topic string
	execExit         bool
}

func (e envelope) concernsContainer() bool {
	return e.namespace == criNamespace && !e.execExit
}

// eventCodec sends the subscription request as marshalled and decodes
// envelopes; its name keeps the call's content-subtype "proto".
type eventCodec struct{}

func (eventCodec) Name() string { return "proto" }

func (eventCodec) Marshal(v any) (mem.BufferSlice, error) {
	e, ok := v.(encoded)
	if !ok {
		return nil, fmt.Errorf("event codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(e)}, nil
}

// discarded receives a response whose content does not matter.
type discarded struct{}

func (eventCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if _, ok := v.(*discarded); ok {
		return nil
	}
	out, ok := v.(*envelope)
	if !ok {
		return fmt.Errorf("event codec: cannot unmarshal into %T", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return out.decode(buf.ReadOnlyData())
}

// decode reads an Envelope: namespace (2), topic (3) and event (4, an Any
// whose value, 2, is a TaskExit for /tasks/exit).
func (e *envelope) decode(b []byte) error {
	var event []byte
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 2:
			e.namespace = string(v)
		case 3:
			e.topic = string(v)
		case 4:
			event = v
		}
		return nil
	})
	if err != nil || e.topic != topicTaskExit {
		return err
	}
	var value []byte
	if err := eachField(event, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == 2 && typ == protowire.BytesType {
			value = v
		}
		return nil
	}); err != nil {
		return err
	}
	// TaskExit: container_id (1), id (2): the process's ID, the
	// container's own for its init process.
	var containerID, id string
	if err := eachField(value, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case typ != protowire.BytesType:
		case num == 1:
			containerID = string(v)
		case num == 2:
			id = string(v)
		}
		return nil
	}); err != nil {
		return err
	}
	e.execExit = id != "" && id != containerID
	return nil
}
