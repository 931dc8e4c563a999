package kuberuntime

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestLocalhostSeccompProfileUnderRoot(t *testing.T) {
	localhost := func(path string) *v1.SeccompProfile {
		return &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(path)}
	}
	tests := []struct {
		name    string
		profile *v1.SeccompProfile
		want    *runtimeapi.SecurityProfile // nil: a *ConfigError
	}{
		{"none is unconfined", nil, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}},
		{"runtime default", &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
		{"localhost under the root", localhost("profiles/deny-mkdir.json"),
			&runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/nodelet/seccomp/profiles/deny-mkdir.json"}},
		{"localhost escaping the root", localhost("../../../etc/x.json"), nil},
		{"localhost absolute", localhost("/etc/x.json"), nil},
		{"localhost empty", localhost(""), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := seccompProfile(tt.profile, "/var/lib/nodelet/seccomp")
			if tt.want == nil {
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want a *ConfigError", err)
				}
				return
			}
			if err != nil || got.ProfileType != tt.want.ProfileType || got.LocalhostRef != tt.want.LocalhostRef {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
