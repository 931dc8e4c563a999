// Package manifests checks the kustomize configuration under config/: that
// config/default renders with kubectl kustomize and that a real API server
// accepts every object in it (a server-side dry run); that its DaemonSet
// runs nodelet beside a kubelet without sharing the kubelet's Node, ports,
// runtime or directories, and reads the host's identity from the host;
// that nothing in it gives the nodes' group or nodelet's ServiceAccount
// access to Secrets or ConfigMaps beyond what the Node authorizer grants;
// and that the image `make image` builds imports into containerd under the
// name the DaemonSet uses and runs.
package manifests
