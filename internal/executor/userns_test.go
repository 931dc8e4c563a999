package executor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
)

func TestLowestFreeSlot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		used   []uint32
		slots  uint32
		want   uint32
		wantOK bool
	}{
		{name: "empty", slots: 4, want: 0, wantOK: true},
		{name: "first taken", used: []uint32{0}, slots: 4, want: 1, wantOK: true},
		{name: "hole", used: []uint32{0, 2}, slots: 4, want: 1, wantOK: true},
		{name: "full", used: []uint32{0, 1}, slots: 2, wantOK: false},
		{name: "no slots", slots: 0, wantOK: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			used := map[uint32]types.UID{}
			for _, s := range tc.used {
				used[s] = "x"
			}
			got, ok := lowestFreeSlot(used, tc.slots)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("lowestFreeSlot = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestCheckUserNamespaceRange(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, length uint32
		wantErr       string
	}{
		{name: "kubelet default", first: DefaultUserNamespaceFirstID, length: DefaultUserNamespaceLength},
		{name: "a subuid range", first: 1 << 20, length: 110 * UserNamespaceIDsPerPod},
		{name: "unaligned start", first: 100000, length: UserNamespaceIDsPerPod, wantErr: "not a multiple"},
		{name: "host's own IDs", first: 0, length: UserNamespaceIDsPerPod, wantErr: "below 65536"},
		{name: "unaligned length", first: UserNamespaceIDsPerPod, length: 1000, wantErr: "not a positive multiple"},
		{name: "empty", first: UserNamespaceIDsPerPod, length: 0, wantErr: "not a positive multiple"},
		{name: "past 2^32", first: 1<<32 - UserNamespaceIDsPerPod, length: 2 * UserNamespaceIDsPerPod, wantErr: "exceed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkUserNamespaceRange(tc.first, tc.length)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestUserNamespacesStableAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	const first, length = 2 * UserNamespaceIDsPerPod, 3 * UserNamespaceIDsPerPod
	u, err := NewUserNamespaces(dir, first, length)
	if err != nil {
		t.Fatal(err)
	}
	want := map[types.UID]criconfig.IDRange{}
	for i, uid := range []types.UID{"a", "b", "c"} {
		ids, err := u.IDs(uid)
		if err != nil {
			t.Fatal(err)
		}
		if exp := (criconfig.IDRange{First: first + uint32(i)*UserNamespaceIDsPerPod, Length: UserNamespaceIDsPerPod}); ids != exp {
			t.Errorf("pod %s got %+v, want %+v", uid, ids, exp)
		}
		want[uid] = ids
	}
	if _, err := u.IDs("d"); err == nil {
		t.Error("a fourth pod got a range out of three")
	}
	if err := u.Release("b"); err != nil {
		t.Fatal(err)
	}
	if got := u.UIDs(); !sameUIDs(got, []types.UID{"a", "c"}) {
		t.Errorf("UIDs after releasing b = %v, want a and c", got)
	}

	// A restart reads the ranges back: running pods keep theirs, the
	// freed one goes to the next pod.
	u, err = NewUserNamespaces(dir, first, length)
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []types.UID{"c", "a"} {
		if ids, err := u.IDs(uid); err != nil || ids != want[uid] {
			t.Errorf("after restart pod %s got %+v, %v; want %+v", uid, ids, err, want[uid])
		}
	}
	if ids, err := u.IDs("e"); err != nil || ids != want["b"] {
		t.Errorf("new pod got %+v, %v; want the freed %+v", ids, err, want["b"])
	}

	// A range recorded outside the configured one is refused at start.
	if _, err := NewUserNamespaces(dir, 10*UserNamespaceIDsPerPod, length); err == nil {
		t.Error("ranges outside the configured one were accepted")
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "x.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewUserNamespaces(bad, first, length); err == nil {
		t.Error("a corrupt record was accepted")
	}
}

func sameUIDs(a, b []types.UID) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(u types.UID) bool { return !slices.Contains(b, u) })
}
