package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	tests := []struct {
		name    string
		pod     *v1.Pod
		want    string
		wantErr bool
	}{
		{"pod name", podtest.NewPod(), "web", false},
		{"spec hostname", podtest.NewPod(func(p *v1.Pod) { p.Spec.Hostname = "h" }), "h", false},
		{"truncated without trailing dash", podtest.NewPod(func(p *v1.Pod) { p.Name = long }), strings.Repeat("a", 62), false},
		{"FQDN", podtest.NewPod(func(p *v1.Pod) { p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "sub", ptr.To(true) }), "web.sub.default.svc.cluster.local", false},
		{"hostnameOverride wins, without a domain", podtest.NewPod(func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "h", "sub", ptr.To(true)
			p.Spec.HostnameOverride = ptr.To("db-0.example.internal")
		}), "db-0.example.internal", false},
		{"hostnameOverride not a DNS subdomain", podtest.NewPod(func(p *v1.Pod) { p.Spec.HostnameOverride = ptr.To("Not_Valid") }), "", true},
		{"hostnameOverride cut to 63", podtest.NewPod(func(p *v1.Pod) { p.Spec.HostnameOverride = ptr.To(strings.Repeat("a", 62) + ".b") }),
			strings.Repeat("a", 62), false},
		{"FQDN too long", podtest.NewPod(func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = strings.Repeat("h", 40), "sub", ptr.To(true)
		}), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PodHostname(tt.pod, "cluster.local")
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("PodHostname = %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
