// Package prepuller keeps the images a Node's prepull.nodelet.io/images
// annotation names pulled on that node, as a reconciler added to nodelet
// through github.com/nodelet/nodelet/pkg/nodelet. It watches its own Node,
// asks the container runtime for each image's status, pulls a missing one
// (without credentials, one at a time, each within a timeout) and looks
// again every interval, so that an image removed meanwhile — by image
// garbage collection, say — is back before a pod needs it. It reports with
// the kubelet's image Events on the Node (Pulling, Pulled, Failed) and a
// Node condition of its own, ImagesPrePulled. A failing image is retried
// with the kubelet's image back-off (10s, doubling up to 300s), which is
// checkpointed on the node's disk so that a restart of nodelet does not
// start it over. The decisions — parsing the annotation, which images to
// pull now, the condition to report — are pure functions; Reconcile only
// reads, calls them and acts.
package prepuller
