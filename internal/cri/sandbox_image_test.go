package cri

import "testing"

func TestSandboxImageFromInfo(t *testing.T) {
	cases := []struct {
		name    string
		info    map[string]string
		want    string
		wantErr bool
	}{
		{name: "containerd's config", info: map[string]string{"config": `{"sandboxImage":"registry.k8s.io/pause:3.6","enableSelinux":false}`}, want: "registry.k8s.io/pause:3.6"},
		{name: "no config", info: map[string]string{"golang": "go1.20"}, wantErr: true},
		// containerd 2: the sandbox image is the image service's, and
		// listed as pinned.
		{name: "config without it", info: map[string]string{"config": `{"containerd":{"defaultRuntimeName":"runc"},"enableSelinux":false}`}, want: ""},
		{name: "not JSON", info: map[string]string{"config": `sandboxImage`}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SandboxImageFromInfo(tc.info)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("SandboxImageFromInfo = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
