package nodeinfo

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/cri"
)

func runtimeStatus(conds ...*runtimeapi.RuntimeCondition) *runtimeapi.RuntimeStatus {
	return &runtimeapi.RuntimeStatus{Conditions: conds}
}

func TestRuntimeProblems(t *testing.T) {
	ready := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Status: true}
	net := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	netDown := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Reason: "NetworkPluginNotReady", Message: "cni plugin not initialized"}
	rtDown := &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Reason: "Broken", Message: "oops"}
	tests := []struct {
		name string
		st   *runtimeapi.RuntimeStatus
		err  error
		want []string
	}{
		{name: "ready", st: runtimeStatus(ready, net)},
		{name: "unreachable", err: errors.New("connection refused"), want: []string{"container runtime is down: connection refused"}},
		{name: "network not ready", st: runtimeStatus(ready, netDown), want: []string{
			"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni plugin not initialized"}},
		{name: "runtime not ready", st: runtimeStatus(rtDown, net), want: []string{
			"container runtime not ready: RuntimeReady=false reason:Broken message:oops"}},
		{name: "no conditions", st: &runtimeapi.RuntimeStatus{}, want: []string{
			"container runtime not ready: RuntimeReady condition is missing",
			"container runtime network not ready: NetworkReady condition is missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RuntimeProblems(tt.st, tt.err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRuntimeVersion(t *testing.T) {
	if got := RuntimeVersion(&runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.6.20~ds1"}); got != "containerd://1.6.20~ds1" {
		t.Errorf("got %q", got)
	}
	if got := RuntimeVersion(nil); got != "" {
		t.Errorf("nil response gave %q, want empty", got)
	}
}

func TestImages(t *testing.T) {
	img := func(size uint64, tags, digests []string) *runtimeapi.Image {
		return &runtimeapi.Image{Size: size, RepoTags: tags, RepoDigests: digests}
	}
	t.Run("names, order and nameless images", func(t *testing.T) {
		got := Images([]*runtimeapi.Image{
			img(10, []string{"small:1"}, nil),
			img(30, []string{"big:1", "big:latest"}, []string{"big@sha256:aa"}),
			img(99, nil, nil),
			img(10, nil, []string{"another@sha256:bb"}),
		})
		want := [][]string{{"big:1", "big:latest", "big@sha256:aa"}, {"another@sha256:bb"}, {"small:1"}}
		if len(got) != len(want) {
			t.Fatalf("got %d images %v, want %d", len(got), got, len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i].Names, want[i]) {
				t.Errorf("image %d names = %v, want %v", i, got[i].Names, want[i])
			}
		}
		if got[0].SizeBytes != 30 {
			t.Errorf("largest first: got size %d", got[0].SizeBytes)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		var many []*runtimeapi.Image
		for i := range 80 {
			tags := []string{fmt.Sprintf("img:%d", i)}
			for j := range 7 {
				tags = append(tags, fmt.Sprintf("alias%d:%d", j, i))
			}
			many = append(many, img(uint64(i), tags, nil))
		}
		got := Images(many)
		if len(got) != MaxImages {
			t.Fatalf("got %d images, want %d", len(got), MaxImages)
		}
		if got[0].SizeBytes != 79 || got[MaxImages-1].SizeBytes != 30 {
			t.Errorf("kept sizes %d..%d, want the largest 79..30", got[0].SizeBytes, got[MaxImages-1].SizeBytes)
		}
		if n := len(got[0].Names); n != MaxNamesPerImage || !strings.HasPrefix(got[0].Names[0], "img:") {
			t.Errorf("names = %v, want %d starting with the first tag", got[0].Names, MaxNamesPerImage)
		}
	})
}

var _ Runtime = cri.Runtime(nil)

func TestNodeFeaturesAndRuntimeHandlers(t *testing.T) {
	tests := []struct {
		name         string
		resp         *runtimeapi.StatusResponse
		wantFeatures *corev1.NodeFeatures
		wantHandlers []corev1.NodeRuntimeHandler
	}{
		{name: "containerd 1.6 reports neither", resp: &runtimeapi.StatusResponse{Status: runtimeStatus()}},
		{name: "features without Strict", resp: &runtimeapi.StatusResponse{Features: &runtimeapi.RuntimeFeatures{}},
			wantFeatures: &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(false)}},
		{name: "handlers and Strict", resp: &runtimeapi.StatusResponse{
			Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
			RuntimeHandlers: []*runtimeapi.RuntimeHandler{
				{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}},
				{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
			}},
			wantFeatures: &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)},
			wantHandlers: []corev1.NodeRuntimeHandler{
				{Name: "", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(false)}},
				{Name: "runc", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(false), UserNamespaces: ptr.To(true)}},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := cri.FeaturesFromStatus(tt.resp)
			if got := NodeFeatures(f); !reflect.DeepEqual(got, tt.wantFeatures) {
				t.Errorf("NodeFeatures = %+v, want %+v", got, tt.wantFeatures)
			}
			if got := NodeRuntimeHandlers(f); !reflect.DeepEqual(got, tt.wantHandlers) {
				t.Errorf("NodeRuntimeHandlers = %+v, want %+v", got, tt.wantHandlers)
			}
		})
	}
}

func TestComputeStatusFeatures(t *testing.T) {
	strict := &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)}
	old := corev1.NodeStatus{Features: strict}
	if got, _ := ComputeStatus(old, Observation{}, time.Now()); !reflect.DeepEqual(got.Features, strict) {
		t.Errorf("features unknown: %+v, want the old ones kept", got.Features)
	}
	got, changed := ComputeStatus(old, Observation{FeaturesKnown: true}, time.Now())
	if got.Features != nil || !changed {
		t.Errorf("runtime reports none: features %+v, changed %v; want none, changed", got.Features, changed)
	}
}
