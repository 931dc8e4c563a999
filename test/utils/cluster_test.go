package utils

import "testing"

func TestClusterCIDRFor(t *testing.T) {
	for _, tc := range []struct {
		slot    int
		want    string
		wantErr bool
	}{
		{slot: 1, want: "10.244.0.0/19"},
		{slot: 2, want: "10.244.32.0/19"},
		{slot: 8, want: "10.244.224.0/19"},
		{slot: 9, want: "10.245.0.0/19"},
		{slot: 32, want: "10.247.224.0/19"},
		{slot: 0, wantErr: true},
		{slot: 33, wantErr: true},
	} {
		got, err := ClusterCIDRFor(tc.slot)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ClusterCIDRFor(%d) = %q, %v; want %q, error %v", tc.slot, got, err, tc.want, tc.wantErr)
		}
	}
}
