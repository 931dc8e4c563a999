// Command addons builds the cluster add-ons' images into the cache: the
// kube-proxy image (hack/kube-proxy.sh's binary and the host's nf_tables
// iptables tools) and the CoreDNS image (hack/coredns.sh's binary), as
// docker-archives under <cache>/images/, and prints one line per image:
// its name and its archive. A second run finds them and builds nothing.
// `make addons-build` runs it.
package main
