package cri

import (
	"context"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// fullLabels are what a container or sandbox of node "n1" carries: the
// brief ones and others.
func fullLabels() map[string]string {
	return map[string]string{
		LabelNode:                              "n1",
		kubetypes.KubernetesPodUIDLabel:        "uid-1",
		kubetypes.KubernetesPodNameLabel:       "web",
		kubetypes.KubernetesPodNamespaceLabel:  "ns",
		kubetypes.KubernetesContainerNameLabel: "app",
		"app.kubernetes.io/name":               "web",
		"io.kubernetes.container.hash":         "abc",
	}
}

func briefOf(full map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range briefLabels {
		if v, ok := full[k]; ok {
			out[k] = v
		}
	}
	return out
}

func fullSandbox(id string, state runtimeapi.PodSandboxState, labels map[string]string) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Id:             id,
		Metadata:       &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "uid-1", Namespace: "ns", Attempt: 3},
		State:          state,
		CreatedAt:      1234567890,
		Labels:         labels,
		Annotations:    map[string]string{"kubernetes.io/config.source": "api", "big": string(make([]byte, 300))},
		RuntimeHandler: "runc",
	}
}

func fullContainer(id string, state runtimeapi.ContainerState, labels map[string]string) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:           id,
		PodSandboxId: "sb-" + id,
		Metadata:     &runtimeapi.ContainerMetadata{Name: "app", Attempt: 2},
		Image:        &runtimeapi.ImageSpec{Image: "busybox"},
		ImageRef:     "sha256:0123",
		State:        state,
		CreatedAt:    1234567890,
		Labels:       labels,
		Annotations:  map[string]string{"io.kubernetes.container.restartCount": "2"},
		ImageId:      "sha256:0123",
	}
}

func bufferOf(t *testing.T, m proto.Message) mem.BufferSlice {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}
}

func TestBriefCodecKeepsWhatARelistReads(t *testing.T) {
	sandboxes := []*runtimeapi.PodSandbox{
		fullSandbox("sb1", runtimeapi.PodSandboxState_SANDBOX_READY, fullLabels()),
		fullSandbox("sb2", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, nil),
	}
	var got briefSandboxes
	if err := (briefCodec{}).Unmarshal(bufferOf(t, &runtimeapi.ListPodSandboxResponse{Items: sandboxes}), &got); err != nil {
		t.Fatal(err)
	}
	want := []*runtimeapi.PodSandbox{
		{Id: "sb1", Metadata: sandboxes[0].Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 1234567890, Labels: briefOf(fullLabels())},
		{Id: "sb2", Metadata: sandboxes[1].Metadata, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: 1234567890},
	}
	if len(got.items) != len(want) {
		t.Fatalf("decoded %d sandboxes, want %d", len(got.items), len(want))
	}
	for i := range want {
		if !proto.Equal(got.items[i], want[i]) {
			t.Errorf("sandbox %d decoded as %v, want %v", i, got.items[i], want[i])
		}
	}

	containers := []*runtimeapi.Container{
		fullContainer("c1", runtimeapi.ContainerState_CONTAINER_RUNNING, fullLabels()),
		fullContainer("c2", runtimeapi.ContainerState_CONTAINER_EXITED, map[string]string{"other": "x"}),
	}
	var gotC briefContainers
	if err := (briefCodec{strs: &interner{}}).Unmarshal(bufferOf(t, &runtimeapi.ListContainersResponse{Containers: containers}), &gotC); err != nil {
		t.Fatal(err)
	}
	wantC := []*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "sb-c1", Metadata: containers[0].Metadata, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 1234567890, Labels: briefOf(fullLabels())},
		{Id: "c2", PodSandboxId: "sb-c2", Metadata: containers[1].Metadata, State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: 1234567890},
	}
	if len(gotC.items) != len(wantC) {
		t.Fatalf("decoded %d containers, want %d", len(gotC.items), len(wantC))
	}
	for i := range wantC {
		if !proto.Equal(gotC.items[i], wantC[i]) {
			t.Errorf("container %d decoded as %v, want %v", i, gotC.items[i], wantC[i])
		}
	}

	// An empty list is no list.
	var none briefContainers
	if err := (briefCodec{}).Unmarshal(bufferOf(t, &runtimeapi.ListContainersResponse{}), &none); err != nil || len(none.items) != 0 {
		t.Errorf("empty list decoded as %v, %v", none.items, err)
	}
}

func TestBriefCodecRefusesMalformedMessages(t *testing.T) {
	whole, err := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		fullContainer("c1", runtimeapi.ContainerState_CONTAINER_RUNNING, fullLabels()),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"cut short":       whole[:len(whole)-5],
		"bad tag":         {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"length too long": {0x0a, 0x7f, 0x0a},
	} {
		var out briefContainers
		if err := (briefCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &out); err == nil {
			t.Errorf("%s: decoded %v without an error", name, out.items)
		}
	}
	var wrong runtimeapi.ListContainersResponse
	if err := (briefCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(whole)}, &wrong); err == nil {
		t.Error("decoded into a type the codec does not know")
	}
}

// listServer answers the two list calls with fixed objects and records the
// filters it was sent.
type listServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	sandboxes       []*runtimeapi.PodSandbox
	containers      []*runtimeapi.Container
	sandboxFilter   *runtimeapi.PodSandboxFilter
	containerFilter *runtimeapi.ContainerFilter
}

func (s *listServer) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake"}, nil
}

func (s *listServer) ListPodSandbox(_ context.Context, r *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	s.sandboxFilter = r.GetFilter()
	return &runtimeapi.ListPodSandboxResponse{Items: s.sandboxes}, nil
}

func (s *listServer) ListContainers(_ context.Context, r *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	s.containerFilter = r.GetFilter()
	return &runtimeapi.ListContainersResponse{Containers: s.containers}, nil
}

func TestBriefListerOverGRPC(t *testing.T) {
	other := fullLabels()
	other[LabelNode] = "n2"
	srv := &listServer{
		sandboxes: []*runtimeapi.PodSandbox{
			fullSandbox("mine", runtimeapi.PodSandboxState_SANDBOX_READY, fullLabels()),
			// A runtime that ignores the selector must not hand over
			// another node's objects.
			fullSandbox("theirs", runtimeapi.PodSandboxState_SANDBOX_READY, other),
		},
		containers: []*runtimeapi.Container{
			fullContainer("mine", runtimeapi.ContainerState_CONTAINER_RUNNING, fullLabels()),
			fullContainer("theirs", runtimeapi.ContainerState_CONTAINER_RUNNING, other),
		},
	}
	sock := filepath.Join(t.TempDir(), "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	conn, err := dialBrief(context.Background(), "unix://"+sock, time.Minute)
	if err != nil || conn == nil {
		t.Fatalf("dialing: %v, %v", conn, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &Client{node: "n1", opts: Options{NodeName: "n1"}.withDefaults(), brief: conn}
	b := c.Brief()
	ctx := context.Background()

	sbs, err := b.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app.kubernetes.io/name": "web"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 || sbs[0].GetId() != "mine" || !maps.Equal(sbs[0].GetLabels(), briefOf(fullLabels())) {
		t.Errorf("sandboxes listed: %v, want only mine with the brief labels", sbs)
	}
	if want := map[string]string{LabelNode: "n1", "app.kubernetes.io/name": "web"}; !maps.Equal(srv.sandboxFilter.GetLabelSelector(), want) {
		t.Errorf("sandbox selector sent: %v, want %v", srv.sandboxFilter.GetLabelSelector(), want)
	}

	cs, err := b.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].GetId() != "mine" || cs[0].GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("containers listed: %v, want only mine, running", cs)
	}
	if want := map[string]string{LabelNode: "n1"}; !maps.Equal(srv.containerFilter.GetLabelSelector(), want) {
		t.Errorf("container selector sent: %v, want %v", srv.containerFilter.GetLabelSelector(), want)
	}

	// The images in use are those of every container, nodelet's or not.
	used, err := c.ImagesInUse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]bool{"busybox": true, "sha256:0123": true}; !maps.Equal(used, want) {
		t.Errorf("images in use: %v, want %v", used, want)
	}
	if srv.containerFilter == nil || len(srv.containerFilter.GetLabelSelector()) != 0 {
		t.Errorf("images in use listed with filter %v, want an empty one", srv.containerFilter)
	}

	// Without a connection of its own, the client lists in full.
	if _, ok := (&Client{}).Brief().(*Client); !ok {
		t.Error("a client without a brief connection did not list through itself")
	}
	if conn, err := dialBrief(context.Background(), "unix://"+filepath.Join(t.TempDir(), "none.sock"), time.Second); err == nil {
		_ = conn.Close()
		t.Error("dialing a socket nothing listens on succeeded")
	}
	if conn, err := dialBrief(context.Background(), "tcp://127.0.0.1:1", time.Second); conn != nil || err != nil {
		t.Errorf("dialing a non-unix endpoint: %v, %v; want no connection", conn, err)
	}
}

// BenchmarkListContainersDecode decodes one ListContainers answer of 110
// containers, in full (as a relist did), briefly, and briefly with the
// objects of the last list recalled (as a relist at rest does).
func BenchmarkListContainersDecode(b *testing.B) {
	resp := &runtimeapi.ListContainersResponse{}
	for i := range 110 {
		resp.Containers = append(resp.Containers, fullContainer(fmt.Sprintf("%064d", i), runtimeapi.ContainerState_CONTAINER_RUNNING, fullLabels()))
	}
	data, err := proto.Marshal(resp)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out runtimeapi.ListContainersResponse
			if err := proto.Unmarshal(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The interner is shared, as between a client's relists.
	codec := briefCodec{strs: &interner{}}
	b.Run("brief", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out briefContainers
			if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	recalling := briefCodec{strs: &interner{}, recall: &recall{}, full: true}
	b.Run("recalled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out briefContainers
			if err := recalling.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestImagesCodecReadsWhatAFullListHolds: the images codec finds, in a
// ListContainers answer, the images a full decode of it names.
func TestImagesCodecReadsWhatAFullListHolds(t *testing.T) {
	other := fullContainer("c2", runtimeapi.ContainerState_CONTAINER_EXITED, nil)
	other.Image = &runtimeapi.ImageSpec{Image: "registry.k8s.io/pause:3.10", Annotations: map[string]string{"a": "b"}, UserSpecifiedImage: "pause"}
	other.ImageRef, other.ImageId = "sha256:feed", "sha256:beef"
	bare := &runtimeapi.Container{Id: "c3"}
	resp := &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		fullContainer("c1", runtimeapi.ContainerState_CONTAINER_RUNNING, fullLabels()), other, bare,
	}}
	want := map[string]bool{}
	for _, c := range resp.Containers {
		for _, s := range []string{c.GetImage().GetImage(), c.GetImageRef(), c.GetImageId()} {
			if s != "" {
				want[s] = true
			}
		}
	}
	got := imageSet{}
	if err := (imagesCodec{}).Unmarshal(bufferOf(t, resp), got); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, imageSet(want)) {
		t.Errorf("images decoded: %v, want %v", got, want)
	}
	if err := (imagesCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x05, 0x01})}, imageSet{}); err == nil {
		t.Error("a malformed answer decoded without an error")
	}
}

func TestInternerHandsOutOneStringPerValue(t *testing.T) {
	in := &interner{}
	a, b := in.get([]byte("uid-1")), in.get([]byte("uid-1"))
	if a != "uid-1" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("two gets of uid-1: %q at %p and %q at %p, want one string", a, unsafe.StringData(a), b, unsafe.StringData(b))
	}
	for i := range maxInterned + 1 {
		in.get(fmt.Appendf(nil, "id-%d", i))
	}
	if n := len(in.strs); n > maxInterned {
		t.Errorf("interner holds %d strings, more than its bound %d", n, maxInterned)
	}
	if got := (*interner)(nil).get([]byte("x")); got != "x" {
		t.Errorf("nil interner returned %q", got)
	}
}

func TestBriefCodecRecallsUnchangedObjects(t *testing.T) {
	codec := briefCodec{strs: &interner{}, recall: &recall{}, full: true}
	list := func(t *testing.T, c briefCodec, containers ...*runtimeapi.Container) []*runtimeapi.Container {
		t.Helper()
		var out briefContainers
		if err := c.Unmarshal(bufferOf(t, &runtimeapi.ListContainersResponse{Containers: containers}), &out); err != nil {
			t.Fatal(err)
		}
		return out.items
	}
	running := func(id string) *runtimeapi.Container {
		return fullContainer(id, runtimeapi.ContainerState_CONTAINER_RUNNING, fullLabels())
	}
	first := list(t, codec, running("c1"), running("c2"))
	again := list(t, codec, running("c1"), running("c2"))
	if again[0] != first[0] || again[1] != first[1] {
		t.Error("a list of unchanged containers decoded them again")
	}

	exited := fullContainer("c2", runtimeapi.ContainerState_CONTAINER_EXITED, fullLabels())
	changed := list(t, codec, running("c1"), exited)
	if changed[0] != first[0] {
		t.Error("the unchanged container was decoded again")
	}
	if changed[1] == first[1] || changed[1].GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("the exited container was handed out as %v, want it decoded with its new state", changed[1])
	}
	if first[1].GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Error("an object handed out before was modified")
	}
	want := &runtimeapi.Container{Id: "c2", PodSandboxId: "sb-c2", Metadata: exited.Metadata,
		State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: exited.CreatedAt, Labels: briefOf(fullLabels())}
	if !proto.Equal(changed[1], want) {
		t.Errorf("decoded %v, want %v", changed[1], want)
	}

	// A filtered list reads what the full ones remember and adds nothing.
	filtered := codec
	filtered.full = false
	some := list(t, filtered, exited, running("c3"))
	if some[0] != changed[1] {
		t.Error("a filtered list decoded a remembered container again")
	}
	if after := list(t, codec, running("c1"), exited, running("c3")); after[2] == some[1] {
		t.Error("a filtered list's container was remembered")
	}
	// A container gone from a full list is forgotten.
	list(t, codec, running("c1"))
	if got := list(t, codec, running("c1"), exited); got[1] == changed[1] {
		t.Error("a container no longer listed was still remembered")
	}
}

// TestBriefCodecReadsAListInFrames: a large list arrives in several 16 KiB
// frames and decodes as it does in one piece.
func TestBriefCodecReadsAListInFrames(t *testing.T) {
	var sandboxes []*runtimeapi.PodSandbox
	for i := range 200 {
		sandboxes = append(sandboxes, fullSandbox(fmt.Sprintf("sb%03d", i), runtimeapi.PodSandboxState_SANDBOX_READY, fullLabels()))
	}
	whole, err := proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: sandboxes})
	if err != nil {
		t.Fatal(err)
	}
	const frame = 16 << 10
	if len(whole) <= 2*frame {
		t.Fatalf("the list is %d bytes, too small for this test", len(whole))
	}
	var framed mem.BufferSlice
	for b := whole; len(b) > 0; b = b[min(frame, len(b)):] {
		framed = append(framed, mem.SliceBuffer(b[:min(frame, len(b))]))
	}
	var inOne, inFrames briefSandboxes
	if err := (briefCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(whole)}, &inOne); err != nil {
		t.Fatal(err)
	}
	if err := (briefCodec{}).Unmarshal(framed, &inFrames); err != nil {
		t.Fatal(err)
	}
	if len(inFrames.items) != len(sandboxes) || len(inOne.items) != len(sandboxes) {
		t.Fatalf("decoded %d sandboxes in frames and %d in one piece, want %d", len(inFrames.items), len(inOne.items), len(sandboxes))
	}
	for i := range inOne.items {
		if !proto.Equal(inOne.items[i], inFrames.items[i]) {
			t.Errorf("sandbox %d: %v in frames, %v in one piece", i, inFrames.items[i], inOne.items[i])
		}
	}
}
