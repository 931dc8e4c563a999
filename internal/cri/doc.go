// Package cri is nodelet's boundary to the container runtime: a narrow Runtime
// interface over the CRI RuntimeService and ImageService, and Client, its
// implementation over k8s.io/cri-client (Dial) or over any
// k8s.io/cri-api RuntimeService and ImageManagerService pair (New), such as the
// fakes in k8s.io/cri-api/pkg/apis/testing. Client enforces nodelet's
// ownership rule: every sandbox and container it creates carries LabelNode
// with the node's name, lists return only such objects, and every call that
// names a sandbox or container by ID refuses one without that label
// (ErrNotOwned), so a runtime shared with another agent is never disturbed.
// Stops and removals are idempotent: an object the runtime no longer knows
// counts as stopped or removed. Each call is bounded by a per-call timeout
// and observed in the kubelet_runtime_operations_* metrics. Features reads
// the runtime handlers and features the runtime reports in its Status
// response; FeatureCache keeps them so that pod syncs do not ask again.
// Brief (BriefOf for any Runtime) lists the same owned objects over a
// connection of Dial's own with a codec that decodes only IDs, states,
// creation times, metadata and the labels naming the pod and container,
// for the callers that list every second or so (and the container
// collector) and read nothing else; ImagesInUse goes over that connection
// too and decodes only each container's images. An object whose ID and
// state are those of the last unfiltered list is that list's object
// again, shared and never modified. WatchChanges, over that
// connection, subscribes to containerd's own event service (on the CRI
// socket) for the CRI namespace's task exits, OOM kills and container
// removals, so that the relister lists the runtime when something
// changed; another runtime, which does not serve containerd's version
// service, has none to offer (ErrNoEvents).
package cri
