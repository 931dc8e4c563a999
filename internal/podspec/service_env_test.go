package podspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svc(namespace, name, clusterIP string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1.ServiceSpec{ClusterIP: clusterIP, Ports: ports},
	}
}

func port(name string, p int32, proto v1.Protocol) v1.ServicePort {
	return v1.ServicePort{Name: name, Port: p, Protocol: proto}
}

// masterVars are the variables of default/kubernetes at 10.0.0.1:443.
var masterVars = map[string]string{
	"KUBERNETES_SERVICE_HOST":       "10.0.0.1",
	"KUBERNETES_SERVICE_PORT":       "443",
	"KUBERNETES_SERVICE_PORT_HTTPS": "443",
	"KUBERNETES_PORT":               "tcp://10.0.0.1:443",
	"KUBERNETES_PORT_443_TCP":       "tcp://10.0.0.1:443",
	"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
	"KUBERNETES_PORT_443_TCP_PORT":  "443",
	"KUBERNETES_PORT_443_TCP_ADDR":  "10.0.0.1",
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestServiceEnv(t *testing.T) {
	master := svc("default", "kubernetes", "10.0.0.1", port("https", 443, v1.ProtocolTCP))
	// A Service of namespace ns with two ports, the second named and UDP.
	db := svc("ns", "my-db", "10.0.0.7", port("", 5432, ""), port("metrics-port", 9187, v1.ProtocolUDP))
	dbVars := map[string]string{
		"MY_DB_SERVICE_HOST":              "10.0.0.7",
		"MY_DB_SERVICE_PORT":              "5432",
		"MY_DB_SERVICE_PORT_METRICS_PORT": "9187",
		"MY_DB_PORT":                      "tcp://10.0.0.7:5432",
		"MY_DB_PORT_5432_TCP":             "tcp://10.0.0.7:5432",
		"MY_DB_PORT_5432_TCP_PROTO":       "tcp",
		"MY_DB_PORT_5432_TCP_PORT":        "5432",
		"MY_DB_PORT_5432_TCP_ADDR":        "10.0.0.7",
		"MY_DB_PORT_9187_UDP":             "udp://10.0.0.7:9187",
		"MY_DB_PORT_9187_UDP_PROTO":       "udp",
		"MY_DB_PORT_9187_UDP_PORT":        "9187",
		"MY_DB_PORT_9187_UDP_ADDR":        "10.0.0.7",
	}
	tests := []struct {
		name      string
		namespace string
		links     bool
		master    *v1.Service
		services  []*v1.Service
		want      map[string]string
	}{
		{
			name: "master only", namespace: "ns", links: true, master: master,
			want: masterVars,
		},
		{
			name: "no master known, no services", namespace: "ns", links: true,
			want: map[string]string{},
		},
		{
			name: "a namespace service with a named UDP port", namespace: "ns", links: true, master: master,
			services: []*v1.Service{db},
			want:     merge(masterVars, dbVars),
		},
		{
			name: "service links off: the master only", namespace: "ns", links: false, master: master,
			services: []*v1.Service{db},
			want:     masterVars,
		},
		{
			name: "services of other namespaces are ignored", namespace: "other", links: true, master: master,
			services: []*v1.Service{db},
			want:     masterVars,
		},
		{
			name: "headless and IP-less services are skipped", namespace: "ns", links: true, master: master,
			services: []*v1.Service{
				svc("ns", "headless", v1.ClusterIPNone, port("", 80, "")),
				svc("ns", "external", "", port("", 80, "")),
			},
			want: masterVars,
		},
		{
			name: "a headless master is not a master", namespace: "ns", links: true,
			master: svc("default", "kubernetes", v1.ClusterIPNone, port("https", 443, "")),
			want:   map[string]string{},
		},
		{
			name: "the pod's namespace wins over the master service", namespace: "ns", links: true, master: master,
			services: []*v1.Service{svc("ns", "kubernetes", "10.9.9.9", port("", 8080, ""))},
			want: map[string]string{
				"KUBERNETES_SERVICE_HOST":        "10.9.9.9",
				"KUBERNETES_SERVICE_PORT":        "8080",
				"KUBERNETES_PORT":                "tcp://10.9.9.9:8080",
				"KUBERNETES_PORT_8080_TCP":       "tcp://10.9.9.9:8080",
				"KUBERNETES_PORT_8080_TCP_PROTO": "tcp",
				"KUBERNETES_PORT_8080_TCP_PORT":  "8080",
				"KUBERNETES_PORT_8080_TCP_ADDR":  "10.9.9.9",
			},
		},
		{
			name: "links off: a namespace service named kubernetes does not replace the master", namespace: "ns", links: false, master: master,
			services: []*v1.Service{svc("ns", "kubernetes", "10.9.9.9", port("", 8080, ""))},
			want:     masterVars,
		},
		{
			name: "pod in default: the master is one of its services", namespace: "default", links: true, master: master,
			services: []*v1.Service{master, svc("default", "web", "10.0.0.8", port("http", 80, v1.ProtocolTCP))},
			want: merge(masterVars, map[string]string{
				"WEB_SERVICE_HOST":      "10.0.0.8",
				"WEB_SERVICE_PORT":      "80",
				"WEB_SERVICE_PORT_HTTP": "80",
				"WEB_PORT":              "tcp://10.0.0.8:80",
				"WEB_PORT_80_TCP":       "tcp://10.0.0.8:80",
				"WEB_PORT_80_TCP_PROTO": "tcp",
				"WEB_PORT_80_TCP_PORT":  "80",
				"WEB_PORT_80_TCP_ADDR":  "10.0.0.8",
			}),
		},
		{
			name: "an IPv6 cluster IP is bracketed in URLs", namespace: "ns", links: true,
			services: []*v1.Service{svc("ns", "v6", "fd00::10", port("", 53, v1.ProtocolSCTP))},
			want: map[string]string{
				"V6_SERVICE_HOST":       "fd00::10",
				"V6_SERVICE_PORT":       "53",
				"V6_PORT":               "sctp://[fd00::10]:53",
				"V6_PORT_53_SCTP":       "sctp://[fd00::10]:53",
				"V6_PORT_53_SCTP_PROTO": "sctp",
				"V6_PORT_53_SCTP_PORT":  "53",
				"V6_PORT_53_SCTP_ADDR":  "fd00::10",
			},
		},
		{
			name: "a service without ports gives nothing", namespace: "ns", links: true,
			services: []*v1.Service{svc("ns", "portless", "10.0.0.9")},
			want:     map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ServiceEnv(tt.namespace, tt.links, tt.master, tt.services)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ServiceEnv (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServiceEnvCollisionIsStable: Service x's port named service-host and
// Service x-service-port both define X_SERVICE_PORT_SERVICE_HOST. The
// kubelet's map walk gives either value; here the later Service in name
// order wins, every time.
func TestServiceEnvCollisionIsStable(t *testing.T) {
	services := []*v1.Service{
		svc("ns", "x-service-port", "10.0.0.2", port("", 1, "")),
		svc("ns", "x", "10.0.0.3", port("", 2, ""), port("service-host", 3, "")),
	}
	first := ServiceEnv("ns", true, nil, services)
	if got := first["X_SERVICE_PORT_SERVICE_HOST"]; got != "10.0.0.2" {
		t.Fatalf("X_SERVICE_PORT_SERVICE_HOST = %q, want x-service-port's cluster IP 10.0.0.2", got)
	}
	for range 50 {
		if diff := cmp.Diff(first, ServiceEnv("ns", true, nil, services)); diff != "" {
			t.Fatalf("ServiceEnv changed between runs (-first +now):\n%s", diff)
		}
	}
}
