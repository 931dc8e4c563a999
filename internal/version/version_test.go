package version

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

func TestBuildMetadata(t *testing.T) {
	cases := []struct{ in, want string }{
		{"v0.1.0", "nodelet.v0.1.0"},
		{"v0.1.0-dev", "nodelet.v0.1.0-dev"},
		{"v0.1.0-3-gabc1234-dirty", "nodelet.v0.1.0-3-gabc1234-dirty"},
		{"703cc32", "nodelet.703cc32"},
		{"v1.0.0+build.5", "nodelet.v1.0.0.build.5"},
		{"a_b..c/d", "nodelet.a.b.c.d"},
		{"", "nodelet"},
	}
	valid := regexp.MustCompile(`^[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*$`)
	for _, tc := range cases {
		got := BuildMetadata(tc.in)
		if got != tc.want {
			t.Errorf("BuildMetadata(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !valid.MatchString(got) {
			t.Errorf("BuildMetadata(%q) = %q is not valid semver build metadata", tc.in, got)
		}
	}
}

// TestKubeletVersionReadsAsKubernetesVersion checks that what the Node
// reports parses as the Kubernetes version with nodelet's in its build
// metadata, for the versions make build gives.
func TestKubeletVersionReadsAsKubernetesVersion(t *testing.T) {
	want := utilversion.MustParseSemantic(KubernetesVersion)
	for _, v := range []string{"v0.1.0", "v0.1.0-dev", "v0.2.0-7-g1234abc-dirty", "1234abc"} {
		Version = v
		got, err := utilversion.ParseSemantic(KubeletVersion())
		if err != nil {
			t.Fatalf("Version %s: kubeletVersion %q does not parse: %v", v, KubeletVersion(), err)
		}
		if cmp, _ := got.Compare(KubernetesVersion); cmp != 0 || got.PreRelease() != "" {
			t.Errorf("Version %s: kubeletVersion %q reads as %s, want %s", v, KubeletVersion(), got, want)
		}
		if got.BuildMetadata() != BuildMetadata(v) {
			t.Errorf("Version %s: build metadata %q, want %q", v, got.BuildMetadata(), BuildMetadata(v))
		}
	}
	Version = "v0.1.0-dev"
}

// TestKubernetesVersionMatchesGoMod keeps KubernetesVersion's minor equal
// to the k8s.io/api module nodelet is built with.
func TestKubernetesVersionMatchesGoMod(t *testing.T) {
	f, err := os.Open("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var api string
	for s := bufio.NewScanner(f); s.Scan(); {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "k8s.io/api" {
			api = fields[1]
		}
	}
	if api == "" {
		t.Fatal("go.mod requires no k8s.io/api")
	}
	mod := utilversion.MustParseSemantic(api)
	k8s := utilversion.MustParseSemantic(KubernetesVersion)
	if mod.Major() != 0 || mod.Minor() != k8s.Minor() || k8s.Major() != 1 {
		t.Errorf("go.mod has k8s.io/api %s, which is Kubernetes 1.%d, but KubernetesVersion is %s", api, mod.Minor(), KubernetesVersion)
	}
}
