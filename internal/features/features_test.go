package features

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gates   map[string]bool
		wantErr string
	}{
		{name: "none"},
		{name: "beta off", gates: map[string]bool{"ContainerRestartRules": false}},
		{name: "GA at its default", gates: map[string]bool{"UserNamespacesSupport": true}},
		{name: "GA locked", gates: map[string]bool{"InPlacePodVerticalScaling": false}, wantErr: "InPlacePodVerticalScaling"},
		{name: "unknown", gates: map[string]bool{"NoSuchGate": true}, wantErr: "NoSuchGate"},
		{name: "logging gate", gates: map[string]bool{"LoggingBetaOptions": true}},
		{name: "MemoryQoS off", gates: map[string]bool{"MemoryQoS": false}},
		{name: "NodeSwap locked", gates: map[string]bool{"NodeSwap": false}, wantErr: "NodeSwap"},
		{name: "a kubelet gate nodelet does not act on", gates: map[string]bool{"RotateKubeletServerCertificate": true, "DynamicResourceAllocation": true}},
		{name: "a kubelet gate off against its lock", gates: map[string]bool{"DynamicResourceAllocation": false}, wantErr: "DynamicResourceAllocation"},
		{name: "an alpha kubelet gate on", gates: map[string]bool{"APIServingWithRoutine": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.gates)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Check error = %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}

func TestSetAndEnabled(t *testing.T) {
	saved := Gate
	t.Cleanup(func() { Gate = saved })
	Gate = New()
	if !Enabled(ContainerRestartRules) {
		t.Fatal("ContainerRestartRules is off by default, want on")
	}
	if err := Set(map[string]bool{"ContainerRestartRules": false}); err != nil {
		t.Fatal(err)
	}
	if Enabled(ContainerRestartRules) {
		t.Fatal("ContainerRestartRules is on after setting it off")
	}
}

func TestKnownHasEveryGate(t *testing.T) {
	known := strings.Join(Known(), ",")
	for name := range specs {
		if !strings.Contains(known, string(name)) {
			t.Errorf("Known() lacks %s", name)
		}
	}
}

// TestSpecsAreTheKubelets checks that each gate nodelet acts on has the
// kubelet's stage, default and lock.
func TestSpecsAreTheKubelets(t *testing.T) {
	for name, spec := range specs {
		want, ok := kubeletGates[name]
		if !ok {
			t.Errorf("%s: the kubelet %s has no such gate", name, kubeletVersion)
			continue
		}
		if spec != want {
			t.Errorf("%s: nodelet has %+v, the kubelet %s %+v", name, spec, kubeletVersion, want)
		}
	}
}

// TestEveryKubeletGateIsKnown checks that nodelet's gate knows each of the
// kubelet's gates with the kubelet's default, and takes it at that default.
func TestEveryKubeletGateIsKnown(t *testing.T) {
	g := New()
	all := g.GetAll()
	defaults := map[string]bool{}
	for name, want := range kubeletGates {
		got, ok := all[name]
		if !ok {
			t.Errorf("%s is unknown", name)
			continue
		}
		if got.Default != want.Default || got.PreRelease != want.PreRelease {
			t.Errorf("%s: %+v, the kubelet's %+v", name, got, want)
		}
		defaults[string(name)] = want.Default
	}
	if len(kubeletGates) < 100 {
		t.Fatalf("only %d kubelet gates: kubelet_gates.go looks truncated", len(kubeletGates))
	}
	if err := Check(defaults); err != nil {
		t.Fatalf("every kubelet gate at its default: %v", err)
	}
}

func TestUnimplemented(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gates map[string]bool
		want  []string
	}{
		{name: "none"},
		{name: "implemented", gates: map[string]bool{"ContainerRestartRules": false, "LoggingBetaOptions": false}},
		{name: "at the kubelet's default", gates: map[string]bool{"RotateKubeletServerCertificate": true}},
		{name: "against the default", gates: map[string]bool{"RotateKubeletServerCertificate": false, "APIServingWithRoutine": true},
			want: []string{"APIServingWithRoutine=true", "RotateKubeletServerCertificate=false"}},
		{name: "unknown is Check's", gates: map[string]bool{"NoSuchGate": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Unimplemented(tc.gates)
			if len(got) != len(tc.want) {
				t.Fatalf("Unimplemented = %q, want %d warnings naming %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) || !strings.Contains(got[i], "does not implement") {
					t.Errorf("warning %d = %q, want it to name %s", i, got[i], w)
				}
			}
		})
	}
}
