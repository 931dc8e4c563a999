package nodeinfo

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/cri"
)

// Runtime is the part of the container runtime node status needs; the
// runtime boundary's cri.Runtime satisfies it. Every method may be called
// concurrently and must honour ctx's deadline.
type Runtime interface {
	// Version returns the runtime's name and version.
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
	Status(ctx context.Context) (*runtimeapi.RuntimeStatus, error)
	// ListImages lists the images the runtime holds; a nil filter lists all.
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
}

// Limits on the images reported in node status, as the kubelet's defaults.
const (
	// MaxImages is how many images a status lists, the largest first.
	MaxImages = 50
	// MaxNamesPerImage is how many names one image entry carries.
	MaxNamesPerImage = 5
)

// RuntimeVersion formats a version response as containerRuntimeVersion:
// "<runtimeName>://<runtimeVersion>".
func RuntimeVersion(v *runtimeapi.VersionResponse) string {
	if v == nil || v.RuntimeName == "" {
		return ""
	}
	return v.RuntimeName + "://" + v.RuntimeVersion
}

// RuntimeProblems lists why the runtime cannot run pods, given the result
// of its Status call: down when the call failed, not ready when its
// RuntimeReady or NetworkReady condition is false or missing. It is empty
// when the runtime is ready.
func RuntimeProblems(st *runtimeapi.RuntimeStatus, statusErr error) []string {
	if statusErr != nil {
		return []string{fmt.Sprintf("container runtime is down: %v", statusErr)}
	}
	find := func(t string) *runtimeapi.RuntimeCondition {
		for _, c := range st.GetConditions() {
			if c.GetType() == t {
				return c
			}
		}
		return nil
	}
	var problems []string
	for _, want := range []struct{ typ, what string }{
		{runtimeapi.RuntimeReady, "container runtime not ready"},
		{runtimeapi.NetworkReady, "container runtime network not ready"},
	} {
		c := find(want.typ)
		switch {
		case c == nil:
			problems = append(problems, fmt.Sprintf("%s: %s condition is missing", want.what, want.typ))
		case !c.Status:
			problems = append(problems, fmt.Sprintf("%s: %s=false reason:%s message:%s", want.what, c.Type, c.Reason, c.Message))
		}
	}
	return problems
}

// Images turns the runtime's image list into node status images: names are
// the repo tags then the repo digests (at most MaxNamesPerImage), images
// without a name are left out, and only the MaxImages largest are kept. The
// order is stable for a given set of images.
func Images(list []*runtimeapi.Image) []corev1.ContainerImage {
	out := make([]corev1.ContainerImage, 0, len(list))
	for _, img := range list {
		names := append(slices.Clone(img.GetRepoTags()), img.GetRepoDigests()...)
		if len(names) == 0 {
			continue
		}
		if len(names) > MaxNamesPerImage {
			names = names[:MaxNamesPerImage]
		}
		out = append(out, corev1.ContainerImage{Names: names, SizeBytes: int64(img.GetSize())})
	}
	slices.SortStableFunc(out, func(a, b corev1.ContainerImage) int {
		if c := cmp.Compare(b.SizeBytes, a.SizeBytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Names[0], b.Names[0])
	})
	if len(out) > MaxImages {
		out = out[:MaxImages]
	}
	return out
}

// FeatureSource reads the runtime's handlers and features; cri.Client
// implements it.
type FeatureSource interface {
	Features(ctx context.Context) (cri.Features, error)
}

// NodeFeatures returns the node's status.features as the kubelet reports
// them from the runtime: whether it supports supplementalGroupsPolicy
// Strict, or nil when the runtime reports no features.
func NodeFeatures(f cri.Features) *corev1.NodeFeatures {
	if !f.FeaturesReported {
		return nil
	}
	return &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(f.SupplementalGroupsPolicy)}
}

// NodeRuntimeHandlers returns the node's status.runtimeHandlers as the
// kubelet reports them: the runtime's handlers with their features,
// ordered by name ("" is the default handler); none when the runtime lists
// none.
func NodeRuntimeHandlers(f cri.Features) []corev1.NodeRuntimeHandler {
	if !f.HandlersReported {
		return nil
	}
	out := make([]corev1.NodeRuntimeHandler, 0, len(f.Handlers))
	for _, name := range slices.Sorted(maps.Keys(f.Handlers)) {
		h := f.Handlers[name]
		out = append(out, corev1.NodeRuntimeHandler{Name: name, Features: &corev1.NodeRuntimeHandlerFeatures{
			RecursiveReadOnlyMounts: ptr.To(h.RecursiveReadOnlyMounts),
			UserNamespaces:          ptr.To(h.UserNamespaces),
		}})
	}
	return out
}
