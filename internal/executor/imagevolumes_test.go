package executor

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

// recordedMounts is a VolumeManager that keeps the image references each
// container's mounts were built with.
type recordedMounts struct {
	noVolumes
	images map[string]map[string]string
}

func (r *recordedMounts) Mounts(_ *v1.Pod, c *v1.Container, _ int32, _ []criconfig.EnvVar, images map[string]string) ([]*runtimeapi.Mount, error) {
	r.images[c.Name] = images
	return nil, nil
}

// fixedFeatures is a FeatureSource answering f, or err.
type fixedFeatures struct {
	f   cri.Features
	err error
}

func (s fixedFeatures) Features(context.Context) (cri.Features, error) { return s.f, s.err }

// failingVolumeImages fails every image volume's pull.
type failingVolumeImages struct{ presentImages }

func (failingVolumeImages) EnsureVolumeImage(context.Context, *v1.Pod, *v1.Container, *v1.ImageVolumeSource, []*v1.Secret, *runtimeapi.PodSandboxConfig) (string, error) {
	return "", errors.New("manifest unknown")
}

func imageVolumePod() *v1.Pod {
	pod := fakePod("reader", "plain")
	pod.Spec.Volumes = []v1.Volume{
		{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "registry.example/data:1", PullPolicy: v1.PullAlways}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/a"}, {Name: "data", MountPath: "/b"}, {Name: "scratch", MountPath: "/s"}}
	pod.Spec.Containers[1].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/s"}}
	return pod
}

func TestImageVolumes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features cri.FeatureSource
		images   ImageManager
		// wantImages are the references the reader's mounts got; a
		// waiting reason instead when it must not start.
		wantImages map[string]string
		wantReason string
		wantMsg    string
		// wantImage is the image the failure is recorded for, when it is
		// not the container's own.
		wantImage string
	}{{
		name:       "a runtime that mounts images: pulled by the volume's reference, handed to the mounts",
		features:   fixedFeatures{f: cri.Features{ImageVolumes: true}},
		images:     presentImages{},
		wantImages: map[string]string{"data": "sha256:registry.example/data:1"},
	}, {
		name:       "features unknown: the runtime decides",
		features:   fixedFeatures{err: cri.ErrFeaturesUnknown},
		images:     presentImages{},
		wantImages: map[string]string{"data": "sha256:registry.example/data:1"},
	}, {
		name:       "a runtime known not to mount images: refused, never started without the volume",
		features:   fixedFeatures{f: cri.Features{ImageVolumes: false}},
		images:     presentImages{},
		wantReason: state.ReasonCreateContainerConfigError,
		wantMsg:    "image volumes need a container runtime that mounts them",
	}, {
		name:       "a failed pull is the container's image pull failure",
		features:   fixedFeatures{f: cri.Features{ImageVolumes: true}},
		images:     failingVolumeImages{},
		wantReason: state.ReasonErrImagePull,
		wantMsg:    "manifest unknown",
		wantImage:  "registry.example/data:1",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e, rs := newFakeExecutor(t)
			vols := &recordedMounts{images: map[string]map[string]string{}}
			e.Volumes, e.Features, e.Images = vols, tc.features, tc.images
			pod := imageVolumePod()
			st := state.NewPodState(pod.UID)

			g.Expect(e.Start(context.Background(), pod, state.PodRuntime{}, &st, startPlan(pod), noSave)).To(Succeed())

			g.Expect(vols.images).To(HaveKeyWithValue("plain", BeNil()), "a container without image volumes pulls none")
			if tc.wantReason == "" {
				g.Expect(vols.images).To(HaveKeyWithValue("reader", Equal(tc.wantImages)))
				g.Expect(count(rs.GetCalls(), "StartContainer")).To(Equal(2))
				return
			}
			g.Expect(vols.images).NotTo(HaveKey("reader"))
			g.Expect(st.Containers["reader"].Waiting).To(And(HaveField("Reason", tc.wantReason), HaveField("Message", ContainSubstring(tc.wantMsg)), HaveField("Image", tc.wantImage)))
			g.Expect(count(rs.GetCalls(), "StartContainer")).To(Equal(1), "the other container starts")
		})
	}
}
