package hostpath

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestSocketPath(t *testing.T) {
	for _, tc := range []struct {
		endpoint, want string
		wantErr        bool
	}{
		{endpoint: "unix:///run/csi/csi.sock", want: "/run/csi/csi.sock"},
		{endpoint: "unix:/run/csi/csi.sock", want: "/run/csi/csi.sock"},
		{endpoint: "/run/csi/csi.sock", want: "/run/csi/csi.sock"},
		{endpoint: "tcp://127.0.0.1:10000", wantErr: true},
		{endpoint: "unix://", wantErr: true},
		{endpoint: "", wantErr: true},
	} {
		got, err := SocketPath(tc.endpoint)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("SocketPath(%q) = %q, %v; want %q, error %v", tc.endpoint, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		name      string
		r         *csi.CapacityRange
		want      int64
		wantCode  codes.Code
		fitsSizes map[int64]bool
	}{
		{name: "none", r: nil, want: 0, fitsSizes: map[int64]bool{0: true, 1 << 30: true}},
		{name: "required", r: &csi.CapacityRange{RequiredBytes: 1 << 20}, want: 1 << 20,
			fitsSizes: map[int64]bool{1 << 19: false, 1 << 20: true, 1 << 30: true}},
		{name: "limit only", r: &csi.CapacityRange{LimitBytes: 1 << 20}, want: 1 << 20,
			fitsSizes: map[int64]bool{0: true, 1 << 20: true, 1<<20 + 1: false}},
		{name: "both", r: &csi.CapacityRange{RequiredBytes: 1 << 10, LimitBytes: 1 << 20}, want: 1 << 10,
			fitsSizes: map[int64]bool{1 << 9: false, 1 << 10: true, 1 << 21: false}},
		{name: "required over limit", r: &csi.CapacityRange{RequiredBytes: 1 << 21, LimitBytes: 1 << 20}, wantCode: codes.InvalidArgument},
		{name: "negative", r: &csi.CapacityRange{RequiredBytes: -1}, wantCode: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := capacityOf(tc.r)
			if status.Code(err) != tc.wantCode {
				t.Fatalf("capacityOf: %v, want code %v", err, tc.wantCode)
			}
			if err == nil && got != tc.want {
				t.Errorf("capacityOf = %d, want %d", got, tc.want)
			}
			for size, want := range tc.fitsSizes {
				if fits(size, tc.r) != want {
					t.Errorf("fits(%d) = %v, want %v", size, !want, want)
				}
			}
		})
	}
}

func TestVolumeIDs(t *testing.T) {
	first, again, other := volumeID("pvc-1"), volumeID("pvc-1"), volumeID("pvc-2")
	if first != again || first == other {
		t.Error("volume ids are not one per name")
	}
	if !validID(volumeID("pvc-1")) {
		t.Errorf("a generated id %q is not valid", volumeID("pvc-1"))
	}
	for id, want := range map[string]bool{
		"csi-0123abcd": true, "": false, ".": false, "..": false, "a/b": false, "../x": false, stateFile: false,
	} {
		if validID(id) != want {
			t.Errorf("validID(%q) = %v, want %v", id, !want, want)
		}
	}
}

func TestRecordOfKeepsSecretNamesOnly(t *testing.T) {
	rec := recordOf("NodePublishVolume", &csi.NodePublishVolumeRequest{
		VolumeId: "v", Secrets: map[string]string{"b": "secret-b", "a": "secret-a"},
	})
	if len(rec.SecretKeys) != 2 || rec.SecretKeys[0] != "a" || rec.SecretKeys[1] != "b" {
		t.Errorf("secret keys %v, want [a b]", rec.SecretKeys)
	}
	if rec := recordOf("NodePublishVolume", &csi.NodePublishVolumeRequest{VolumeId: "v"}); rec.SecretKeys != nil {
		t.Errorf("secret keys without secrets: %v", rec.SecretKeys)
	}
}
