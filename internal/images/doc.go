// Package images makes sure a container's image is present before the pod
// reconciler creates the container, the way the kubelet's image manager does.
// Manager.EnsureImage applies the container's pull policy (Always,
// IfNotPresent, Never; defaulted from the tag when empty), and
// EnsureVolumeImage an image volume's, pulls through the
// CRI with the credentials of the pod's imagePullSecrets (a Keyring matched
// against the image's registry host and repository path, as docker and the
// kubelet match them, falling back to an anonymous pull), pulls one image at
// a time or in parallel but never the same image twice at once (a pull that
// several callers wait for is shared, and cancelled when none waits any
// more), and records the kubelet's Pulling, Pulled, Failed,
// ErrImageNeverPull and InspectFailed events on the pod. When to pull
// again after a failure (10s doubling to 5 min, per pod and container) is
// the pod plan's image pull back-off (internal/kuberuntime/plan), kept in
// the pod's checkpoint. PullRecords remember which credentials pulled each
// image, as the kubelet's image pull manager does, so that under the
// imagePullCredentialsVerificationPolicy a pod uses an image another pod
// pulled only if it holds credentials that could pull it; otherwise it
// pulls again with its own (or, with pull policy Never, fails as if the
// image were absent). Errors wrap ErrImagePull, ErrImageNeverPull,
// ErrInvalidImageName or ErrImageInspect; Reason turns one into the reason
// and message of the container's Waiting state. Credentials are never
// logged.
package images
