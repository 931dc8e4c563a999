// Command hollow runs many hollow nodelets in one process against an API
// server: every node a whole nodelet (its own manager, client, caches,
// lease, node and pod status) over a fake container runtime (see
// internal/hollow). For scale measurements by hand:
//
//	go run ./hack/hollow --nodes 100 --kubeconfig admin.kubeconfig \
//	    --client-ca-cert client-ca.crt --client-ca-key client-ca.key
//
// With the API server's client CA, each node authenticates as
// system:node:<name> in system:nodes with a certificate of its own, so the
// Node authorizer and NodeRestriction treat it as the node it is. Without
// it the command refuses to start, unless --shared-credentials runs every
// node with the kubeconfig's own credentials (an identity the Node
// authorizer does not restrict, often cluster-admin). Every node registers
// with the nodelet.io/hollow NoSchedule taint (hollow.Taint). It is a separate
// command, not a nodelet subcommand, so that the fake runtime never ships
// in the nodelet binary.
package main
