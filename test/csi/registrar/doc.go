// Package registrar is a node registrar for tests, the part of
// node-driver-registrar a node agent sees: it asks a CSI driver for its
// name and serves the kubelet's plugin registration API
// (pluginregistration/v1) on <registration dir>/<driver>-reg.sock, so
// that a node agent watching that directory registers the driver.
package registrar
