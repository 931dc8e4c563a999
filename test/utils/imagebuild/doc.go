// Package imagebuild assembles container images from files held in
// memory, with go-containerregistry and without a daemon, so that the same
// inputs give the same digests: a Layer's entries are owned by root and
// stamped with one time, and WriteArchive writes a docker-archive tarball
// (what `ctr images import` and `docker load` read) through a temporary
// file and a rename, so that a reader never sees half of one. The test
// harness builds its images with it (test/utils, test/conformance), and
// hack/image builds nodelet's.
package imagebuild
