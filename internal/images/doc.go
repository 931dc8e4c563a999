// Package images makes sure a container's image is present before the pod
// reconciler creates the container, the way the kubelet's image manager does.
// Manager.EnsureImage applies the container's pull policy (Always,
// IfNotPresent, Never; defaulted from the tag when empty), pulls through the
// CRI with the credentials of the pod's imagePullSecrets (a Keyring matched
// against the image's registry host and repository path, as docker and the
// kubelet match them, falling back to an anonymous pull), backs off failed
// pulls per pod and image (10s doubling to 5 min), pulls one image at a time
// or in parallel but never the same image twice at once, and records the
// kubelet's Pulling, Pulled, Failed and BackOff events on the pod. Its errors
// wrap ErrImagePull, ErrImagePullBackOff, ErrImageNeverPull,
// ErrInvalidImageName or ErrImageInspect; Reason turns one into the reason
// and message of the container's Waiting state. Credentials are never
// logged.
package images
