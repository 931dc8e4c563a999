// Package nodeapitest builds what the node API's tests and its fuzz target
// serve requests from: owned sandboxes and containers of pods in namespace
// "ns" on the CRI fake, behind nodelet's CRI client, with their log files,
// and a stand-in for the runtime's streaming server. Only tests import it.
package nodeapitest
