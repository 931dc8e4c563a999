package version

import (
	"fmt"
	"strings"
)

// Version is nodelet's version, a semantic version with a leading "v".
// Release builds override it with -ldflags -X.
var Version = "v0.1.0-dev"

// KubernetesVersion is the Kubernetes release whose kubelet nodelet stands
// in for: the API types it is built with (k8s.io/api v0.37.x) and the node
// behaviour it implements. A test keeps its minor equal to go.mod's.
const KubernetesVersion = "v1.37.0"

// buildMetadataPrefix starts nodelet's part of KubeletVersion's build
// metadata.
const buildMetadataPrefix = "nodelet"

// KubeletVersion is the Node's status.nodeInfo.kubeletVersion:
// KubernetesVersion with nodelet's Version as semver build metadata, e.g.
// v1.37.0+nodelet.v0.1.0. Tools that check version skew (kubectl, kubeadm,
// the API server's node checks) ignore build metadata and read v1.37.0.
func KubeletVersion() string {
	return KubernetesVersion + "+" + BuildMetadata(Version)
}

// String is what nodelet --version prints.
func String() string {
	return fmt.Sprintf("nodelet %s (Kubernetes %s, kubeletVersion %s)", Version, KubernetesVersion, KubeletVersion())
}

// BuildMetadata returns "nodelet." followed by v turned into dot-separated
// semver build identifiers: every character outside [0-9A-Za-z-] becomes a
// dot-separated boundary, and empty identifiers are dropped, so any
// version string (v0.1.0, v0.1.0-3-gabc1234-dirty, a commit hash, a+b)
// gives valid build metadata.
func BuildMetadata(v string) string {
	fields := strings.FieldsFunc(v, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-')
	})
	return strings.Join(append([]string{buildMetadataPrefix}, fields...), ".")
}

// IsNodelet reports whether a Node's kubeletVersion was reported by nodelet.
func IsNodelet(kubeletVersion string) bool {
	return strings.Contains(kubeletVersion, "+"+buildMetadataPrefix)
}
