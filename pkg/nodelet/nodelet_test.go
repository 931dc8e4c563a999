package nodelet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodelet/nodelet/internal/cri"
)

func TestRegistry(t *testing.T) {
	setup := func(*Node) error { return nil }
	cases := []struct {
		name    string
		extra   []Reconciler
		want    string
		wantErr string
	}{
		{name: "none", want: "configmap,csi,node,pod,podcidr,secret"},
		{name: "one", extra: []Reconciler{{Name: "prepuller", Setup: setup}}, want: "configmap,csi,node,pod,podcidr,prepuller,secret"},
		{name: "built-in name", extra: []Reconciler{{Name: "pod", Setup: setup}}, wantErr: `reconciler name "pod" is registered already`},
		{name: "twice", extra: []Reconciler{{Name: "a", Setup: setup}, {Name: "a", Setup: setup}}, wantErr: `reconciler name "a" is registered already`},
		{name: "upper case", extra: []Reconciler{{Name: "PrePuller", Setup: setup}}, wantErr: `must be a lower-case DNS label`},
		{name: "disabling prefix", extra: []Reconciler{{Name: "-x", Setup: setup}}, wantErr: `must be a lower-case DNS label`},
		{name: "star", extra: []Reconciler{{Name: "*", Setup: setup}}, wantErr: `must be a lower-case DNS label`},
		{name: "empty", extra: []Reconciler{{Setup: setup}}, wantErr: `must be a lower-case DNS label`},
		{name: "longest", extra: []Reconciler{{Name: "a" + strings.Repeat("-", 61) + "b", Setup: setup}}, want: "a" + strings.Repeat("-", 61) + "b,configmap,csi,node,pod,podcidr,secret"},
		{name: "too long", extra: []Reconciler{{Name: strings.Repeat("a", 64), Setup: setup}}, wantErr: `must be a lower-case DNS label`},
		{name: "trailing dash", extra: []Reconciler{{Name: "a-", Setup: setup}}, wantErr: `must be a lower-case DNS label`},
		{name: "dot", extra: []Reconciler{{Name: "a.b", Setup: setup}}, wantErr: `must be a lower-case DNS label`},
		{name: "no setup", extra: []Reconciler{{Name: "x"}}, wantErr: `reconciler "x" has no setup function`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := registry(tc.extra)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(reg.Names(), ","); got != tc.want {
				t.Fatalf("names %s, want %s", got, tc.want)
			}
		})
	}
	// The built-in registry is never changed by an extension's.
	if _, err := registry([]Reconciler{{Name: "extra", Setup: setup}}); err != nil {
		t.Fatal(err)
	}
	if reg, _ := registry(nil); strings.Contains(strings.Join(reg.Names(), ","), "extra") {
		t.Fatal("an added reconciler leaked into the built-in registry")
	}
}

func TestRunRefusesABadReconcilerName(t *testing.T) {
	if code := Run([]string{"--help"}, Reconciler{Name: "Bad", Setup: func(*Node) error { return nil }}); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
}

func TestCheckpoints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "extensions", "x", "checkpoints")
	c, err := OpenCheckpoints(dir)
	if err != nil {
		t.Fatal(err)
	}
	type value struct {
		Images []string `json:"images"`
		Count  int      `json:"count"`
	}
	var got value
	if err := c.Load("state", &got); !errors.Is(err, ErrCheckpointNotFound) {
		t.Fatalf("load before save: %v, want ErrCheckpointNotFound", err)
	}
	want := value{Images: []string{"a:1", "b:2"}, Count: 2}
	if err := c.Save("state", want); err != nil {
		t.Fatal(err)
	}
	if err := c.Load("state", &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Images, ",") != "a:1,b:2" || got.Count != 2 {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	info, err := os.Stat(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, want 0600", info.Mode().Perm())
	}
	if info, err = os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v (%v), want 0700", info.Mode().Perm(), err)
	}
	keys, err := c.Keys()
	if err != nil || strings.Join(keys, ",") != "state" {
		t.Fatalf("keys %v (%v), want [state]", keys, err)
	}
	if err := c.Save("../escape", want); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("save with a path key: %v, want ErrInvalidKey", err)
	}
	// A flipped byte is reported and set aside, never decoded.
	path := filepath.Join(dir, "state")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "a:1", "a:9", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Load("state", &got); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("load of an edited file: %v, want ErrCorruptCheckpoint", err)
	}
	if err := c.Load("state", &got); !errors.Is(err, ErrCheckpointNotFound) {
		t.Fatalf("load after the corrupt file was set aside: %v, want ErrCheckpointNotFound", err)
	}
	if err := c.Remove("state"); err != nil {
		t.Fatalf("removing a missing key: %v", err)
	}
}

func TestRuntimeLendsNoMutation(t *testing.T) {
	rt, err := cri.New(critest.NewFakeRuntimeService(), critest.NewFakeImageService(), cri.Options{NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	var lent Runtime = ownedRuntime{rt: rt}
	if _, ok := lent.(interface {
		StopContainer(context.Context, string, int64) error
	}); ok {
		t.Fatal("the lent runtime can stop containers")
	}
	if _, ok := lent.(interface {
		RemovePodSandbox(context.Context, string) error
	}); ok {
		t.Fatal("the lent runtime can remove sandboxes")
	}
	if _, ok := lent.(cri.Runtime); ok {
		t.Fatal("the lent runtime is the whole runtime")
	}
	if _, err := lent.Version(context.Background()); err != nil {
		t.Fatalf("a read through the lent runtime: %v", err)
	}
}
