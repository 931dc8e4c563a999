// Package fuzz holds fuzz targets that run pods built from arbitrary bytes
// through nodelet's pipeline — admission, the plan, volume set-up and
// mounts, the CRI configs, the status and the termination plan — and check
// that nothing panics and that no container is ever given a mount source
// outside its pod's directory or a hostPath volume the pod declared. The
// package has no code of its own; `make test` runs the target for a few
// seconds and `make fuzz` for longer.
package fuzz
