// Package features holds the Kubernetes feature gates nodelet knows, under
// the kubelet's names, defaults and stages for the Kubernetes version nodelet
// implements. They are set from the configuration's featureGates and the
// --feature-gates flag; the engine asks Enabled.
package features
