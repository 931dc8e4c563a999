// Command image builds nodelet's container image without Docker: it
// compiles nodelet statically (CGO_ENABLED=0) and appends it as the only
// layer of an empty base with go-containerregistry, then writes a
// docker-archive tarball that `ctr -n k8s.io images import` and
// `docker load` accept. The image is tagged with the name config/default
// deploys (its kustomization's images entry for "nodelet") unless --tag
// says otherwise. `make image` runs it.
//
// The image holds /nodelet and an empty /tmp, nothing else: nodelet
// resolves nothing through NSS (the host's /etc/hosts and resolv.conf are
// mounted into host-network pods), verifies the API server with the CA of
// its kubeconfig rather than system roots, leaves image pulls to the
// runtime, and mounts with system calls, not mount(8).
package main
