// Package approver is nodelet's CSR approver, run as `nodelet
// csr-approver`: a controller-runtime controller that approves the client
// certificate requests of nodelet's nodes, and only for their own node
// names, in place of the controller-manager's approval of every bootstrap
// token's node client request.
//
// A nodelet bootstrap token is made for one node (hack/bootstrap-token.sh):
// its extra groups are system:bootstrappers:nodelet and the node-binding
// group of NodeGroup(name), which the API server puts in the CSR's groups,
// so the binding is checked without reading any Secret. Decide, a pure
// function over the CSR and the other CSRs of the same requester, approves
// a request to kubernetes.io/kube-apiserver-client-kubelet for
// CN=system:node:<name>, O=system:nodes, with the node client usages and
// no subject alternative names when the requester is a nodelet bootstrap
// token bound to <name> that has had no other request approved, or the
// node system:node:<name> itself renewing its certificate. Any other
// request to that signer from a nodelet bootstrap token is denied with a
// reason. DecideServing approves a node's request to
// kubernetes.io/kubelet-serving for its own subject when its Node is a
// nodelet's (label nodelet.io/agent=nodelet) and every DNS name and IP of
// the request is one of the Node's addresses. Every other CSR is left
// alone. The Reconciler applies the decisions through the approval
// subresource.
package approver
