package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// BriefLister lists a node's own sandboxes and containers as Client does,
// but each object carries only its ID, state, creation time, sandbox ID,
// metadata and the labels that name its pod and container: what a relist
// compares and what the container garbage collector sorts by. A relist
// every second decoded every label and annotation of every object into new
// maps, most of the agent's allocations at rest.
//
// The objects a brief lister returns are shared between its calls: an
// object unchanged since the last unfiltered list is that list's object.
// Callers must not modify them.
type BriefLister interface {
	ListPodSandboxes(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// briefLabels are the labels a brief listing keeps.
var briefLabels = [...]string{
	LabelNode,
	kubetypes.KubernetesPodUIDLabel,
	kubetypes.KubernetesPodNameLabel,
	kubetypes.KubernetesPodNamespaceLabel,
	kubetypes.KubernetesContainerNameLabel,
}

// The runtime service's list methods.
const (
	methodListPodSandbox  = "/runtime.v1.RuntimeService/ListPodSandbox"
	methodListContainers  = "/runtime.v1.RuntimeService/ListContainers"
	briefMaxMessageSize   = 16 << 20
	unixEndpointPrefix    = "unix://"
	briefConnectionTarget = "unix:"
)

// Brief returns the client's brief lister: over a connection of its own
// when Dial made the client for a unix socket, else the client itself.
func (c *Client) Brief() BriefLister {
	if c.brief == nil {
		return c
	}
	return briefLister{c: c, conn: c.brief}
}

// dialBrief opens the connection brief lists use and checks it with a
// version call, as Dial checks the runtime service's own. Connecting now,
// during start-up, also keeps the connection's set-up code out of the pages
// a running agent keeps resident (package residency releases start-up's).
func dialBrief(ctx context.Context, endpoint string, timeout time.Duration) (*grpc.ClientConn, error) {
	path, ok := strings.CutPrefix(endpoint, unixEndpointPrefix)
	if !ok {
		return nil, nil
	}
	conn, err := grpc.NewClient(briefConnectionTarget+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(briefMaxMessageSize)))
	if err != nil {
		return nil, fmt.Errorf("connecting to CRI runtime service %s: %w", endpoint, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("connecting to CRI runtime service %s: %w", endpoint, err)
	}
	return conn, nil
}

type briefLister struct {
	c    *Client
	conn *grpc.ClientConn
}

// codec is the brief codec of the client's lists, which share its strings
// and, for an unfiltered list (full), remember its objects.
func (b briefLister) codec(full bool) grpc.CallOption {
	return grpc.ForceCodecV2(briefCodec{strs: &b.c.briefStrings, recall: &b.c.briefRecall, full: full})
}

// ListPodSandboxes implements BriefLister.
func (b briefLister) ListPodSandboxes(ctx context.Context, filter *runtimeapi.PodSandboxFilter) (_ []*runtimeapi.PodSandbox, err error) {
	defer func(start time.Time) { observe("list_podsandbox", start, err) }(time.Now())
	var req any = b.c.briefRequests.of(b.c.node).sandboxes
	if filter != nil {
		f := proto.Clone(filter).(*runtimeapi.PodSandboxFilter)
		f.LabelSelector = ownerSelector(f.GetLabelSelector(), b.c.node)
		req = &runtimeapi.ListPodSandboxRequest{Filter: f}
	}
	ctx, cancel := b.c.timeout(ctx)
	defer cancel()
	var out briefSandboxes
	if err := b.conn.Invoke(ctx, methodListPodSandbox, req, &out, b.codec(filter == nil)); err != nil {
		return nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	return keepOwned(out.items, b.c.node), nil
}

// ListContainers implements BriefLister.
func (b briefLister) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, err error) {
	defer func(start time.Time) { observe("list_containers", start, err) }(time.Now())
	var req any = b.c.briefRequests.of(b.c.node).containers
	if filter != nil {
		f := proto.Clone(filter).(*runtimeapi.ContainerFilter)
		f.LabelSelector = ownerSelector(f.GetLabelSelector(), b.c.node)
		req = &runtimeapi.ListContainersRequest{Filter: f}
	}
	ctx, cancel := b.c.timeout(ctx)
	defer cancel()
	var out briefContainers
	if err := b.conn.Invoke(ctx, methodListContainers, req, &out, b.codec(filter == nil)); err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	return keepOwned(out.items, b.c.node), nil
}

// encoded is a request marshalled before; the brief codec sends it as is.
type encoded []byte

// briefRequests are the requests of unfiltered brief lists, the same at
// every relist, marshalled once.
type briefRequests struct {
	once       sync.Once
	sandboxes  encoded
	containers encoded
}

func (r *briefRequests) of(node string) *briefRequests {
	r.once.Do(func() {
		// Neither can fail: both are plain messages of strings.
		r.sandboxes, _ = proto.Marshal(&runtimeapi.ListPodSandboxRequest{
			Filter: &runtimeapi.PodSandboxFilter{LabelSelector: ownerSelector(nil, node)}})
		r.containers, _ = proto.Marshal(&runtimeapi.ListContainersRequest{
			Filter: &runtimeapi.ContainerFilter{LabelSelector: ownerSelector(nil, node)}})
	})
	return r
}

// briefSandboxes and briefContainers receive the two list responses.
type (
	briefSandboxes  struct{ items []*runtimeapi.PodSandbox }
	briefContainers struct{ items []*runtimeapi.Container }
)

// briefCodec marshals requests as protobuf and decodes the list responses
// briefly; its name keeps the call's content-subtype "proto". The IDs and
// label values it decodes come from strs: the same every second. An object
// whose bytes recall holds is recall's object, not decoded again; the
// objects of a full list are remembered in recall.
type briefCodec struct {
	strs   *interner
	recall *recall
	full   bool
}

func (briefCodec) Name() string { return "proto" }

func (briefCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(encoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(e)}, nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("brief codec: cannot marshal %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("brief codec: %w", err)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// listBuffers holds the contiguous copies of list responses that arrive in
// several frames. gRPC's default pool rounds anything above 32 KiB up to a
// 1 MiB buffer: a node's list of 110 sandboxes (about 60 KiB) took a fresh
// megabyte at every relist whenever a collection had emptied the pool.
// Tiers at every power of two from 4 KiB to the brief lists' 16 MiB message
// limit (briefMaxMessageSize) round a response up to at most twice its size.
var listBuffers = func() mem.BufferPool {
	p, err := mem.NewBinaryTieredBufferPool(12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24)
	if err != nil {
		panic(fmt.Sprintf("brief codec: buffer pool: %v", err))
	}
	return p
}()

func (c briefCodec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(listBuffers)
	defer buf.Free()
	var (
		sandboxes  *atomic.Pointer[recalled[*runtimeapi.PodSandbox]]
		containers *atomic.Pointer[recalled[*runtimeapi.Container]]
	)
	if c.recall != nil {
		sandboxes, containers = &c.recall.sandboxes, &c.recall.containers
	}
	var err error
	switch out := v.(type) {
	case *briefSandboxes:
		out.items, err = decodeItems(buf.ReadOnlyData(), sandboxes, c.full, briefKind[*runtimeapi.PodSandbox]{
			decode:     c.decodeSandbox,
			stateField: sandboxStateField,
			state:      func(sb *runtimeapi.PodSandbox) int32 { return int32(sb.GetState()) },
		})
		return err
	case *briefContainers:
		out.items, err = decodeItems(buf.ReadOnlyData(), containers, c.full, briefKind[*runtimeapi.Container]{
			decode:     c.decodeContainer,
			stateField: containerStateField,
			state:      func(ctr *runtimeapi.Container) int32 { return int32(ctr.GetState()) },
		})
		return err
	}
	return fmt.Errorf("brief codec: cannot unmarshal into %T", v)
}

// recall holds the objects of a client's last unfiltered brief list of
// each kind by ID. A relist every second finds most objects as they were:
// those are handed out again without being decoded or allocated. Of what a
// brief object holds, only the state of a sandbox or container changes
// after it is made, so an object of the same ID and state is the same.
type recall struct {
	sandboxes  atomic.Pointer[recalled[*runtimeapi.PodSandbox]]
	containers atomic.Pointer[recalled[*runtimeapi.Container]]
}

// recalled maps an object's ID to the object. A map once stored in a
// recall is never modified.
type recalled[T any] map[string]T

// briefKind is what decodeItems needs of a kind of object: its decoder and
// where its ID and state are.
type briefKind[T interface{ GetId() string }] struct {
	decode func([]byte) (T, error)
	// stateField is the number of the state's field in the encoding.
	stateField protowire.Number
	// state is the decoded object's state.
	state func(T) int32
}

// decodeItems decodes the items of a list response: an item whose ID and
// state are those of an object of the last remembered list (in slot, when
// not nil) is that object, any other is decoded. A full list whose items
// are not exactly the remembered ones is remembered in their place.
func decodeItems[T interface{ GetId() string }](data []byte, slot *atomic.Pointer[recalled[T]], full bool, kind briefKind[T]) ([]T, error) {
	var last recalled[T]
	if slot != nil {
		if p := slot.Load(); p != nil {
			last = *p
		}
	}
	var items []T
	if len(last) > 0 {
		items = make([]T, 0, len(last))
	}
	hits := 0
	err := eachItem(data, func(b []byte) error {
		if len(last) > 0 {
			id, state, err := peekIDState(b, kind.stateField)
			if err != nil {
				return err
			}
			if obj, ok := last[string(id)]; ok && kind.state(obj) == state {
				items = append(items, obj)
				hits++
				return nil
			}
		}
		obj, err := kind.decode(b)
		items = append(items, obj)
		return err
	})
	if err != nil || slot == nil || !full || (hits == len(items) && hits == len(last)) {
		return items, err
	}
	next := make(recalled[T], len(items))
	for _, obj := range items {
		next[obj.GetId()] = obj
	}
	slot.Store(&next)
	return items, nil
}

// peekIDState reads an object's ID (field 1) and its state (field
// stateField) without decoding the rest.
func peekIDState(b []byte, stateField protowire.Number) (id []byte, state int32, err error) {
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			id = v
		case num == stateField && typ == protowire.VarintType:
			state = int32(n)
		}
		return nil
	})
	return id, state, err
}

var errBriefMalformed = errors.New("brief codec: malformed message")

// The numbers of the state fields of PodSandbox and Container.
const (
	sandboxStateField   protowire.Number = 3
	containerStateField protowire.Number = 6
)

// eachItem calls f with each element of field 1 of a list response (the
// items of ListPodSandboxResponse, the containers of
// ListContainersResponse), skipping every other field.
func eachItem(b []byte, f func([]byte) error) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == 1 && typ == protowire.BytesType {
			return f(v)
		}
		return nil
	})
}

// eachField calls f with each field of the message b: a length-delimited
// field's bytes as v, a varint's value as n; other types are skipped.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return errBriefMalformed
		}
		b = b[l:]
		var (
			v []byte
			n uint64
		)
		switch typ {
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			n, l = protowire.ConsumeVarint(b)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b)
		}
		if l < 0 {
			return errBriefMalformed
		}
		b = b[l:]
		if typ != protowire.BytesType && typ != protowire.VarintType {
			continue
		}
		if err := f(num, typ, v, n); err != nil {
			return err
		}
	}
	return nil
}

// decodeSandbox decodes a PodSandbox's id (1), metadata (2), state (3),
// created_at (4) and brief labels (5).
func (c briefCodec) decodeSandbox(b []byte) (*runtimeapi.PodSandbox, error) {
	sb := &runtimeapi.PodSandbox{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			sb.Id = c.strs.get(v)
		case num == 2 && typ == protowire.BytesType:
			md, err := c.decodeSandboxMetadata(v)
			sb.Metadata = md
			return err
		case num == sandboxStateField && typ == protowire.VarintType:
			sb.State = runtimeapi.PodSandboxState(n)
		case num == 4 && typ == protowire.VarintType:
			sb.CreatedAt = int64(n)
		case num == 5 && typ == protowire.BytesType:
			var err error
			sb.Labels, err = c.addLabel(sb.Labels, v)
			return err
		}
		return nil
	})
	return sb, err
}

// decodeSandboxMetadata decodes PodSandboxMetadata: name (1), uid (2),
// namespace (3), attempt (4).
func (c briefCodec) decodeSandboxMetadata(b []byte) (*runtimeapi.PodSandboxMetadata, error) {
	md := &runtimeapi.PodSandboxMetadata{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			md.Name = c.strs.get(v)
		case num == 2 && typ == protowire.BytesType:
			md.Uid = c.strs.get(v)
		case num == 3 && typ == protowire.BytesType:
			md.Namespace = c.strs.get(v)
		case num == 4 && typ == protowire.VarintType:
			md.Attempt = uint32(n)
		}
		return nil
	})
	return md, err
}

// decodeContainer decodes a Container's id (1), pod_sandbox_id (2),
// metadata (3), state (6), created_at (7) and brief labels (8).
func (c briefCodec) decodeContainer(b []byte) (*runtimeapi.Container, error) {
	ctr := &runtimeapi.Container{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			ctr.Id = c.strs.get(v)
		case num == 2 && typ == protowire.BytesType:
			ctr.PodSandboxId = c.strs.get(v)
		case num == 3 && typ == protowire.BytesType:
			md, err := c.decodeContainerMetadata(v)
			ctr.Metadata = md
			return err
		case num == containerStateField && typ == protowire.VarintType:
			ctr.State = runtimeapi.ContainerState(n)
		case num == 7 && typ == protowire.VarintType:
			ctr.CreatedAt = int64(n)
		case num == 8 && typ == protowire.BytesType:
			var err error
			ctr.Labels, err = c.addLabel(ctr.Labels, v)
			return err
		}
		return nil
	})
	return ctr, err
}

// decodeContainerMetadata decodes ContainerMetadata: name (1), attempt (2).
func (c briefCodec) decodeContainerMetadata(b []byte) (*runtimeapi.ContainerMetadata, error) {
	md := &runtimeapi.ContainerMetadata{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			md.Name = c.strs.get(v)
		case num == 2 && typ == protowire.VarintType:
			md.Attempt = uint32(n)
		}
		return nil
	})
	return md, err
}

// addLabel adds the map entry b (key 1, value 2) to labels when its key is
// one of briefLabels, making the map if needed, and returns the map.
func (c briefCodec) addLabel(labels map[string]string, b []byte) (map[string]string, error) {
	var key string
	var value []byte
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			key = briefLabel(v)
		case num == 2 && typ == protowire.BytesType:
			value = v
		}
		return nil
	})
	if err != nil || key == "" {
		return labels, err
	}
	if labels == nil {
		labels = make(map[string]string, len(briefLabels))
	}
	labels[key] = c.strs.get(value)
	return labels, nil
}

// briefLabel returns the label of briefLabels spelled k, or "".
func briefLabel(k []byte) string {
	for _, l := range briefLabels {
		if string(k) == l {
			return l
		}
	}
	return ""
}

// The numbers of a Container's image fields: image (an ImageSpec, whose
// image is field 1), image_ref and image_id.
const (
	containerImageField    protowire.Number = 4
	containerImageRefField protowire.Number = 5
	containerImageIDField  protowire.Number = 10
)

// allContainersRequest lists every container of the runtime, nodelet's or
// not: an empty filter.
var allContainersRequest = func() encoded {
	b, err := proto.Marshal(&runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{}})
	if err != nil {
		panic(fmt.Sprintf("images codec: %v", err))
	}
	return b
}()

// imageSet is what imagesCodec decodes a ListContainers answer into: the
// image names, references and IDs of its containers.
type imageSet map[string]bool

// imagesCodec decodes a ListContainers answer into an imageSet, and nothing
// else of its containers; it marshals requests as briefCodec does.
type imagesCodec struct{ briefCodec }

func (imagesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	used, ok := v.(imageSet)
	if !ok {
		return fmt.Errorf("images codec: cannot unmarshal into %T", v)
	}
	buf := data.MaterializeToBuffer(listBuffers)
	defer buf.Free()
	add := func(b []byte) {
		if len(b) > 0 && !used[string(b)] {
			used[string(b)] = true
		}
	}
	return eachItem(buf.ReadOnlyData(), func(b []byte) error {
		return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case containerImageField:
				return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
					if num == 1 && typ == protowire.BytesType {
						add(v)
					}
					return nil
				})
			case containerImageRefField, containerImageIDField:
				add(v)
			}
			return nil
		})
	})
}

// BriefOf returns rt's brief lister, or rt itself when it has none.
func BriefOf(rt Runtime) BriefLister {
	if b, ok := rt.(interface{ Brief() BriefLister }); ok {
		return b.Brief()
	}
	return rt
}

// maxInterned bounds an interner: past it, it starts again empty. A node's
// IDs and label values number a few per container.
const maxInterned = 1 << 14

// interner hands out one string per distinct byte sequence, so that lists
// repeated every second do not allocate the same IDs and names again. Safe
// for concurrent use; a nil interner allocates every string.
type interner struct {
	mu   sync.Mutex
	strs map[string]string
}

func (in *interner) get(b []byte) string {
	if in == nil {
		return string(b)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if s, ok := in.strs[string(b)]; ok {
		return s
	}
	if in.strs == nil || len(in.strs) >= maxInterned {
		in.strs = make(map[string]string)
	}
	s := string(b)
	in.strs[s] = s
	return s
}
