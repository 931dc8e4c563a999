// Package v1alpha1 holds NodeletConfiguration, the component-config API of
// nodelet (group config.nodelet.io), in the way KubeletConfiguration is the
// kubelet's: the types, their defaults, their validation with field paths, and
// the scheme they are registered in. It imports apimachinery, the core/v1
// types (registerWithTaints is a list of corev1.Taint) and component-base's
// configuration types (logging, tracing, a flag type), and nothing of the
// agent, so that any tool can read a nodelet configuration file without
// pulling the agent in.
//
// +kubebuilder:object:generate=true
// +groupName=config.nodelet.io
package v1alpha1
