package conformance

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestSidecarVersions(t *testing.T) {
	tests := []struct {
		name    string
		recipes []hostBinaryImage
		want    []string
		wantErr bool
	}{
		{
			name:    "the storage suite's recipes",
			recipes: storageRecipes,
			want:    []string{"CSI_PROVISIONER_VERSION=v6.3.0", "CSI_ATTACHER_VERSION=v4.12.0"},
		},
		{
			name:    "stand-ins are not built by hack/csi.sh",
			recipes: []hostBinaryImage{{Image: CSIRegistrarImage, Binary: "csi-registrar", StandIn: true}},
		},
		{
			name:    "a sidecar hack/csi.sh does not build",
			recipes: []hostBinaryImage{{Image: "registry.k8s.io/sig-storage/csi-resizer:v2.2.0", Binary: "csi-resizer"}},
			wantErr: true,
		},
		{
			name:    "no version tag",
			recipes: []hostBinaryImage{{Image: "registry.k8s.io/sig-storage/csi-attacher:latest", Binary: "csi-attacher"}},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sidecarVersions(tt.recipes)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStorageRecipes checks the recipes against the real images: the
// entrypoint is the real image's command, every stand-in has a package to
// build, and no image is built twice.
func TestStorageRecipes(t *testing.T) {
	// The real images' entrypoints, by repository.
	entrypoints := map[string]string{
		"csi-provisioner":           "csi-provisioner",
		"csi-attacher":              "csi-attacher",
		"csi-node-driver-registrar": "csi-node-driver-registrar",
		"hostpathplugin":            "hostpathplugin",
	}
	repo := regexp.MustCompile(`^registry\.k8s\.io/sig-storage/([a-z-]+):v[0-9.]+$`)
	seen := map[string]bool{}
	for _, r := range storageRecipes {
		m := repo.FindStringSubmatch(r.Image)
		if m == nil {
			t.Errorf("%s: not a sig-storage image with a version", r.Image)
			continue
		}
		if want := entrypoints[m[1]]; r.Entrypoint != want {
			t.Errorf("%s: entrypoint %q, want %q", r.Image, r.Entrypoint, want)
		}
		if seen[r.Image] {
			t.Errorf("%s: two recipes", r.Image)
		}
		seen[r.Image] = true
		pkg, ok := standInCommands[r.Binary]
		if r.StandIn != ok {
			t.Errorf("%s: stand-in %v, but a package to build: %v", r.Image, r.StandIn, ok)
		}
		if ok && !strings.HasPrefix(pkg, "./test/csi/cmd/") {
			t.Errorf("%s: stand-in %s is not a test CSI command", r.Image, pkg)
		}
	}
	if len(seen) != len(entrypoints) {
		t.Errorf("%d images, want %d", len(seen), len(entrypoints))
	}
}

// TestDRARecipes checks the DRA suite's images: storage's own recipes (one
// build serves both suites), stand-ins only (no sidecar to build), and a
// hostpathplugin with a shell, which the DRA driver's pod runs.
func TestDRARecipes(t *testing.T) {
	if len(draRecipes) == 0 {
		t.Fatal("no DRA recipes")
	}
	for _, r := range draRecipes {
		if !slices.ContainsFunc(storageRecipes, func(s hostBinaryImage) bool { return s.Image == r.Image && s.Binary == r.Binary }) {
			t.Errorf("%s: not the storage suite's recipe", r.Image)
		}
		if !r.StandIn {
			t.Errorf("%s: not a stand-in", r.Image)
		}
		if r.Image == HostpathPluginImage && !r.OnBusybox {
			t.Errorf("%s: without a shell", r.Image)
		}
	}
}
