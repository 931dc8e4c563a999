// Package manifests checks the kustomize configuration under config/: that
// config/default renders with kubectl kustomize, and that nothing in it
// gives the nodes' group or nodelet's ServiceAccount access to Secrets or
// ConfigMaps beyond what the Node authorizer grants.
package manifests
