package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	cases := []struct {
		name      string
		port      intstr.IntOrString
		container *v1.Container
		want      int
		wantErr   bool
	}{
		{name: "number", port: intstr.FromInt32(9090), container: c, want: 9090},
		{name: "named port", port: intstr.FromString("http"), container: c, want: 8080},
		{name: "number as a string", port: intstr.FromString("8081"), container: c, want: 8081},
		{name: "unknown name", port: intstr.FromString("grpc"), container: c, wantErr: true},
		{name: "no container", port: intstr.FromString("http"), wantErr: true},
		{name: "zero", port: intstr.FromInt32(0), container: c, wantErr: true},
		{name: "too large", port: intstr.FromInt32(70000), container: c, wantErr: true},
		{name: "negative string", port: intstr.FromString("-1"), container: c, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolvePort(tc.port, tc.container)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ResolvePort(%v) = %d, %v; want %d, error %v", tc.port.String(), got, err, tc.want, tc.wantErr)
			}
		})
	}
}
