// Command testimages writes the harness's test images (test/utils:
// the pause image and the busybox images) as docker-archive tarballs into
// a directory, for a machine that has no Go and no registry to pull them
// from: a cgroup v2 host checked by hack/cgroupv2-check.sh, or a VM
// guest. Each archive imports with `ctr -n k8s.io images import`.
//
//	go run ./hack/testimages -o DIR [IMAGE...]
//
// Without IMAGE it writes every one of utils.TestImages. It prints the
// path of each archive it wrote.
package main
