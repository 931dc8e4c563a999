// Package proxy forwards a CSI driver's Unix socket to a TCP port that is
// dialed from outside, without knowing anything of gRPC: it listens on both
// endpoints, pairs each connection accepted on the socket with the next one
// accepted on the TCP port, and copies bytes both ways until either side
// closes. Kubernetes' e2e suite runs its mock CSI driver in e2e.test and
// reaches the node through such a pair, dialing the TCP port through the
// API server's port-forward ahead of time; this is the behaviour of
// csi-driver-host-path's hostpathplugin with --proxy-endpoint, written
// anew for the test images.
package proxy
