// Package staticpod turns static pod manifests into pods the way the kubelet
// does: it reads them from a directory or file (FileSource) and from a URL
// (URLSource), decodes, defaults and validates each manifest (Decode,
// SetDefaults, Validate), names the pods after the node and gives each a UID
// that is a hash of its manifest, merges the pods of all sources with the
// first of two pods of one name winning (Pods), keeps them with their last
// status and whether every source has reported (Store), and builds the mirror pods
// that show static pods in the API server (Mirror, MirrorCurrent). It does not
// run pods: the pod engine consumes the pods it hands out, which callers must
// treat as immutable.
package staticpod
