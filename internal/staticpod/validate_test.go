package staticpod

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// validPod is a defaulted static pod that Validate accepts.
func validPod() *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace = "web-node", "default"
	pod.Spec = corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "c", Image: "busybox:1.36",
			Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	SetDefaults(pod)
	return pod
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   []string // field paths in the errors; none: valid
	}{
		{name: "valid", mutate: func(p *corev1.Pod) {}},
		{name: "volumes needing API objects are fine", mutate: func(p *corev1.Pod) {
			p.Spec.ServiceAccountName = "sa"
			p.Spec.Volumes = append(p.Spec.Volumes,
				corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
				corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
				corev1.Volume{Name: "pvc", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
				corev1.Volume{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}}}}}})
		}},
		{name: "sidecar init container", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "side", Image: "x:1", ImagePullPolicy: corev1.PullNever, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
		}},
		{name: "host network with matching ports", mutate: func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 80
		}},
		{name: "bad name", mutate: func(p *corev1.Pod) { p.Name = "Web_Node" }, want: []string{"metadata.name"}},
		{name: "no name", mutate: func(p *corev1.Pod) { p.Name = "" }, want: []string{"metadata.name"}},
		{name: "bad namespace", mutate: func(p *corev1.Pod) { p.Namespace = "a.b" }, want: []string{"metadata.namespace"}},
		{name: "no containers", mutate: func(p *corev1.Pod) { p.Spec.Containers = nil }, want: []string{"spec.containers"}},
		{name: "ephemeral containers", mutate: func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Image: "x"}}}
		}, want: []string{"spec.ephemeralContainers"}},
		{name: "container names shared with init containers", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "c", Image: "x:1", ImagePullPolicy: corev1.PullNever}}
		}, want: []string{"spec.containers[0].name: Duplicate"}},
		{name: "bad container name", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Name = "C" }, want: []string{"spec.containers[0].name"}},
		{name: "no image", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }, want: []string{"spec.containers[0].image"}},
		{name: "bad policies", mutate: func(p *corev1.Pod) {
			p.Spec.RestartPolicy = "Sometimes"
			p.Spec.DNSPolicy = "Any"
			p.Spec.Containers[0].ImagePullPolicy = "Maybe"
			p.Spec.Containers[0].Ports[0].Protocol = "ICMP"
		}, want: []string{"spec.restartPolicy", "spec.dnsPolicy", "spec.containers[0].imagePullPolicy", "spec.containers[0].ports[0].protocol"}},
		{name: "dns none without config", mutate: func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }, want: []string{"spec.dnsConfig"}},
		{name: "regular container restart policy", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}, want: []string{"spec.containers[0].restartPolicy"}},
		{name: "ports out of range", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 0, Protocol: corev1.ProtocolTCP}, {ContainerPort: 70000, HostPort: -1, Protocol: corev1.ProtocolTCP}}
		}, want: []string{"spec.containers[0].ports[0].containerPort", "spec.containers[0].ports[1].containerPort", "spec.containers[0].ports[1].hostPort"}},
		{name: "duplicate port names", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "http", ContainerPort: 81, Protocol: corev1.ProtocolTCP})
		}, want: []string{"spec.containers[0].ports[1].name"}},
		{name: "host network with another host port", mutate: func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 8080
		}, want: []string{"spec.containers[0].ports[0].hostPort"}},
		{name: "mount of a missing volume", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "other" }, want: []string{"spec.containers[0].volumeMounts[0].name: Not found"}},
		{name: "mount without path and twice on one path", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data"}, {Name: "data", MountPath: "/x"}, {Name: "data", MountPath: "/x"}}
		}, want: []string{"spec.containers[0].volumeMounts[0].mountPath", "spec.containers[0].volumeMounts[2].mountPath"}},
		{name: "duplicate and bad volume names", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0], corev1.Volume{Name: "Bad", VolumeSource: p.Spec.Volumes[0].VolumeSource})
		}, want: []string{"spec.volumes[1].name: Duplicate", "spec.volumes[2].name: Invalid"}},
		{name: "volume with no or two sources", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "none"},
				corev1.Volume{Name: "two", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}, HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}})
		}, want: []string{"spec.volumes[1]: Required", "spec.volumes[2]: Forbidden"}},
		{name: "bad file mode and empty host path", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{DefaultMode: ptr.To(int32(0o1777))}}},
				corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}}})
		}, want: []string{"spec.volumes[1]: Invalid", "spec.volumes[2].hostPath.path"}},
		{name: "requests above limits and negative", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("-1")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			}
		}, want: []string{"spec.containers[0].resources.requests[cpu]", "spec.containers[0].resources.limits[memory]"}},
		{name: "probes", mutate: func(p *corev1.Pod) {
			c := &p.Spec.Containers[0]
			c.LivenessProbe = &corev1.Probe{TimeoutSeconds: 1, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet:   &corev1.HTTPGetAction{Port: intstr.FromInt32(0)},
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("Not A Name")}}, PeriodSeconds: 0, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
		}, want: []string{"spec.containers[0].livenessProbe: Required", "spec.containers[0].readinessProbe: Forbidden",
			"spec.containers[0].readinessProbe.httpGet.port", "spec.containers[0].readinessProbe.tcpSocket.port", "spec.containers[0].readinessProbe.periodSeconds"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := validPod()
			tc.mutate(pod)
			errs := Validate(pod)
			if len(errs) != len(tc.want) {
				t.Errorf("%d errors, want %d: %v", len(errs), len(tc.want), errs)
			}
			for _, want := range tc.want {
				found := false
				for _, err := range errs {
					found = found || strings.HasPrefix(err.Error(), want)
				}
				if !found {
					t.Errorf("no error %q in %v", want, errs)
				}
			}
		})
	}
	if errs := Validate(nil); len(errs) == 0 {
		t.Error("a nil pod is valid")
	}
	if errs := Validate(&corev1.Pod{}); len(errs) == 0 {
		t.Error("an empty pod is valid")
	}
}
