package addons

import "embed"

// Files are the add-on manifests, one file per add-on, each a stream of
// YAML documents that are text/template templates.
//
//go:embed *.yaml
var Files embed.FS

// The manifest files in Files, in the order they are applied: kube-proxy
// first, since the pods of the other add-ons reach the API server through
// the kubernetes Service it programs.
const (
	KubeProxyFile = "kube-proxy.yaml"
	CoreDNSFile   = "coredns.yaml"
)

// Order lists the files of Files in the order they are applied.
var Order = []string{KubeProxyFile, CoreDNSFile}
