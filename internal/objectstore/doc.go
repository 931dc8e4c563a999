// Package objectstore holds the ConfigMaps and Secrets the pods of this node
// reference, and the Services their environment needs, read the way the
// Node authorizer allows a node to read them.
//
// PodReferences says, without I/O, which objects a pod names (volumes,
// projected sources, env and envFrom of every container, imagePullSecrets).
// A Store is told which pods run here (RegisterPod, UnregisterPod) and keeps
// one entry per referenced object, ref-counted by those pods. With the Watch
// strategy each entry is a reflector that lists and watches that one object
// through a metadata.name field selector — never a list or watch of a whole
// namespace, which the Node authorizer refuses — relisting after expired
// resource versions and API server restarts; an immutable object is read once
// and not watched. With Cache an entry is refreshed by a GET once its TTL has
// passed, with Get on every read. Whatever the strategy, the last content
// seen is kept while a pod references the object: when the API server cannot
// be reached, every read returns it; an object never seen is a NotFound
// error. ExistingReader, what volumes, container environments and pull
// secrets read, reports an object the API server last said was deleted as
// NotFound, as the kubelet's managers do: an optional volume source empties
// and a required one keeps its files with a failed update (the kubelet's
// FailedMount); a container started after the delete gets
// CreateContainerConfigError for a required reference. GetConfigMap,
// GetSecret and Reader return the last content seen even after a delete. Every change observed is fed, as the object's key, to
// controller-runtime sources (Source), and PodsReferencing names the pods to
// update. ServiceWatcher watches Services only in the namespaces whose pods
// need service links, plus default/kubernetes. Object content — above all
// Secret data — is never logged. Returned objects are copies the caller owns.
package objectstore
