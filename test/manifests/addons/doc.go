// Package addons holds the manifests of the cluster add-ons that run as pods
// on nodelet's nodes: kube-proxy as a DaemonSet and CoreDNS as the cluster
// DNS (a Deployment behind the kube-dns Service), with their
// ServiceAccounts, RBAC and ConfigMaps. The files are text/template
// documents over the cluster's addressing (API server URL, cluster CIDR, DNS
// Service IP, cluster domain) and the images' names; test/utils renders and
// applies them (RenderAddons, InstallAddons).
package addons
