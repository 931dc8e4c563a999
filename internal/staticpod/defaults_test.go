package staticpod

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestSetDefaults(t *testing.T) {
	tests := []struct {
		name  string
		in    corev1.PodSpec
		check func(t *testing.T, s *corev1.PodSpec)
	}{{
		name: "pod level",
		in:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i:1"}}},
		check: func(t *testing.T, s *corev1.PodSpec) {
			want := corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "i:1", ImagePullPolicy: corev1.PullIfNotPresent,
					TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
				RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
				TerminationGracePeriodSeconds: ptr.To(int64(30)), SchedulerName: "default-scheduler",
				SecurityContext: &corev1.PodSecurityContext{}, EnableServiceLinks: ptr.To(true),
				Priority: ptr.To(int32(0)), PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
			}
			if d := cmp.Diff(want, *s); d != "" {
				t.Errorf("spec (-want +got):\n%s", d)
			}
		},
	}, {
		name: "set values are kept",
		in: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, DNSPolicy: corev1.DNSDefault, TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Priority: ptr.To(int32(7)), PriorityClassName: SystemNodeCritical,
			Containers: []corev1.Container{{Name: "c", Image: "i", ImagePullPolicy: corev1.PullNever, TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}}},
		check: func(t *testing.T, s *corev1.PodSpec) {
			c := s.Containers[0]
			if s.RestartPolicy != corev1.RestartPolicyNever || s.DNSPolicy != corev1.DNSDefault || *s.TerminationGracePeriodSeconds != 5 || *s.Priority != 7 ||
				c.ImagePullPolicy != corev1.PullNever || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
				t.Errorf("set values overwritten: %+v", s)
			}
		},
	}, {
		name: "priority classes",
		in:   corev1.PodSpec{PriorityClassName: SystemNodeCritical},
		check: func(t *testing.T, s *corev1.PodSpec) {
			if *s.Priority != 2000001000 {
				t.Errorf("priority %d", *s.Priority)
			}
			other := corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: SystemClusterCritical}}
			SetDefaults(&other)
			if *other.Spec.Priority != 2000000000 {
				t.Errorf("cluster critical priority %d", *other.Spec.Priority)
			}
		},
	}, {
		name: "pull policy by tag",
		in: corev1.PodSpec{Containers: []corev1.Container{{Image: "busybox"}, {Image: "busybox:latest"}, {Image: "reg:5000/busybox"},
			{Image: "reg:5000/busybox:1.36"}, {Image: "busybox@sha256:abc"}, {Image: "busybox:latest@sha256:abc"}}},
		check: func(t *testing.T, s *corev1.PodSpec) {
			want := []corev1.PullPolicy{corev1.PullAlways, corev1.PullAlways, corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullIfNotPresent, corev1.PullAlways}
			for i, c := range s.Containers {
				if c.ImagePullPolicy != want[i] {
					t.Errorf("%s: pull policy %s, want %s", c.Image, c.ImagePullPolicy, want[i])
				}
			}
		},
	}, {
		name: "containers of every kind, ports, probes, handlers, resources, env",
		in: corev1.PodSpec{
			HostNetwork:    true,
			InitContainers: []corev1.Container{{Name: "i", Image: "x:1", Ports: []corev1.ContainerPort{{ContainerPort: 53}}}},
			Containers: []corev1.Container{{
				Name: "c", Image: "x:1",
				Ports:          []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolUDP}},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9}}, PeriodSeconds: 3},
				Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				},
				Env: []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Image: "x"}}},
		},
		check: func(t *testing.T, s *corev1.PodSpec) {
			if p := s.InitContainers[0].Ports[0]; p.Protocol != corev1.ProtocolTCP || p.HostPort != 53 {
				t.Errorf("init port %+v", p)
			}
			c := s.Containers[0]
			if p := c.Ports[0]; p.Protocol != corev1.ProtocolUDP || p.HostPort != 80 {
				t.Errorf("port %+v", p)
			}
			want := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80), Path: "/", Scheme: corev1.URISchemeHTTP}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
			if d := cmp.Diff(want, c.LivenessProbe); d != "" {
				t.Errorf("liveness probe (-want +got):\n%s", d)
			}
			if r := c.ReadinessProbe; r.PeriodSeconds != 3 || r.GRPC.Service == nil {
				t.Errorf("readiness probe %+v", r)
			}
			if h := c.Lifecycle.PreStop.HTTPGet; h.Path != "/" || h.Scheme != corev1.URISchemeHTTP {
				t.Errorf("preStop %+v", h)
			}
			if cpu, mem := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceMemory]; cpu.String() != "100m" || mem.String() != "64Mi" {
				t.Errorf("requests %v", c.Resources.Requests)
			}
			if v := c.Env[0].ValueFrom.FieldRef.APIVersion; v != "v1" {
				t.Errorf("fieldRef apiVersion %q", v)
			}
			if e := s.EphemeralContainers[0]; e.TerminationMessagePath != corev1.TerminationMessagePathDefault || e.ImagePullPolicy != corev1.PullAlways {
				t.Errorf("ephemeral container not defaulted: %+v", e)
			}
		},
	}, {
		name: "volumes",
		in: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "none"},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: ptr.To(int32(0o600))}}},
			{Name: "dapi", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}},
		}},
		check: func(t *testing.T, s *corev1.PodSpec) {
			v := s.Volumes
			if v[0].EmptyDir == nil {
				t.Errorf("a volume without a source is not an emptyDir: %+v", v[0])
			}
			if *v[1].Secret.DefaultMode != 0o644 || *v[2].ConfigMap.DefaultMode != 0o600 || *v[3].DownwardAPI.DefaultMode != 0o644 || *v[4].Projected.DefaultMode != 0o644 {
				t.Errorf("default modes wrong: %+v", v)
			}
			if v[3].DownwardAPI.Items[0].FieldRef.APIVersion != "v1" {
				t.Errorf("downward API fieldRef not defaulted")
			}
			if v[5].HostPath.Type == nil || *v[5].HostPath.Type != corev1.HostPathUnset {
				t.Errorf("hostPath type %v", v[5].HostPath.Type)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: *tc.in.DeepCopy()}
			SetDefaults(pod)
			tc.check(t, &pod.Spec)
			again := pod.DeepCopy()
			SetDefaults(again)
			if d := cmp.Diff(pod, again); d != "" {
				t.Errorf("defaulting twice changes the pod (-once +twice):\n%s", d)
			}
		})
	}
	SetDefaults(nil) // does not panic
}
