// Package version holds the two versions nodelet reports: the Kubernetes
// version whose node agent behaviour it implements (KubernetesVersion, the
// minor of the k8s.io/api module it is built with), and its own release
// (Version, set at build time with
//
//	go build -ldflags "-X github.com/nodelet/nodelet/internal/version.Version=v1.2.3"
//
// ). The Node's kubeletVersion is KubeletVersion: the Kubernetes version
// with nodelet's own in its semver build metadata, so that version-skew
// checks, which ignore build metadata, compare the Kubernetes version.
package version
