package objectstore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func cmKeyRef(name string) *v1.EnvVarSource {
	return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: "k"}}
}

func secretKeyRef(name string) *v1.EnvVarSource {
	return &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: "k"}}
}

func TestPodReferences(t *testing.T) {
	tests := []struct {
		name string
		spec v1.PodSpec
		want References
	}{
		{name: "nothing", want: References{}},
		{
			name: "volumes",
			spec: v1.PodSpec{Volumes: []v1.Volume{
				{Name: "a", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm-vol"}}}},
				{Name: "b", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s-vol"}}},
				{Name: "c", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
					{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s-proj"}}},
					{DownwardAPI: &v1.DownwardAPIProjection{}},
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
				}}}},
				{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			}},
			want: References{ConfigMaps: []string{"cm-vol", "kube-root-ca.crt"}, Secrets: []string{"s-proj", "s-vol"}},
		},
		{
			name: "env and envFrom of every container kind",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{{Name: "init", Env: []v1.EnvVar{{Name: "A", ValueFrom: cmKeyRef("cm-init")}}}},
				Containers: []v1.Container{{
					Name: "main",
					EnvFrom: []v1.EnvFromSource{
						{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm-from"}}},
						{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s-from"}, Optional: ptr.To(true)}},
					},
					Env: []v1.EnvVar{
						{Name: "PLAIN", Value: "x"},
						{Name: "B", ValueFrom: secretKeyRef("s-env")},
						{Name: "C", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					},
				}},
				EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
					Name: "debug", Env: []v1.EnvVar{{Name: "D", ValueFrom: cmKeyRef("cm-ephemeral")}},
				}}},
			},
			want: References{ConfigMaps: []string{"cm-ephemeral", "cm-from", "cm-init"}, Secrets: []string{"s-env", "s-from"}},
		},
		{
			name: "image pull secrets, duplicates and empty names",
			spec: v1.PodSpec{
				ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}, {Name: ""}, {Name: "pull"}},
				Volumes: []v1.Volume{
					{Name: "a", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "pull"}}},
				},
				Containers: []v1.Container{
					{Name: "a", Env: []v1.EnvVar{{Name: "X", ValueFrom: cmKeyRef("same")}}},
					{Name: "b", Env: []v1.EnvVar{{Name: "X", ValueFrom: cmKeyRef("same")}}},
				},
			},
			want: References{ConfigMaps: []string{"same"}, Secrets: []string{"pull"}},
		},
		{
			name: "secrets of volume types nodelet does not mount are not watched",
			spec: v1.PodSpec{Volumes: []v1.Volume{
				{Name: "csi", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &v1.LocalObjectReference{Name: "csi-secret"}}}},
			}},
			want: References{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodReferences(&v1.Pod{Spec: tt.spec})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PodReferences (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNeedsServiceLinks(t *testing.T) {
	for _, tt := range []struct {
		enable *bool
		want   bool
	}{{nil, true}, {ptr.To(true), true}, {ptr.To(false), false}} {
		if got := NeedsServiceLinks(&v1.Pod{Spec: v1.PodSpec{EnableServiceLinks: tt.enable}}); got != tt.want {
			t.Errorf("NeedsServiceLinks(%v) = %v, want %v", ptr.Deref(tt.enable, true), got, tt.want)
		}
	}
}
