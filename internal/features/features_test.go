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
