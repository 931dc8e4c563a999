// Package approver is nodelet's CSR approver, run as `nodelet
// csr-approver`: a controller-runtime controller that approves the client
// certificate requests of nodelet's nodes, only for their own node names,
// in place of the controller-manager's approval of every bootstrap
// token's node client request, and the serving certificate requests of
// nodes an admin opted in, only for names the operator configured.
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
// reason. The Reconciler decides a token's request on the token's
// requests as the API server has them, not as its cache has them, and
// holds a lock until the decision is recorded: a token gets at most one
// approval.
//
// DecideServing, a pure function over the request and ServingFacts,
// approves a node's request to kubernetes.io/kubelet-serving for its own
// subject only when an admin labelled its Node ServingApprovalLabel (in
// the node-restriction.kubernetes.io/ prefix, which NodeRestriction keeps
// a node from setting on itself), and only for names that are the Node's
// own addresses, allowed by the operator's Configuration (DNS name
// patterns, IP CIDRs), not another Node's address, and never a wildcard,
// a name of the API server's Service, a cluster DNS name, its ClusterIP,
// a Service IP (the configured service CIDRs and the cluster's
// ServiceCIDR objects) nor a loopback or link-local address: a node
// writes its own status, so its addresses alone prove nothing.
//
// No approval stands without the requester's permission, asked of the
// API server with a SubjectAccessReview as the controller-manager's
// approver does: create on certificatesigningrequests/nodeclient,
// /selfnodeclient or /selfnodeserving in nodelet's API group
// certificates.nodelet.io (config/approver binds them). A bootstrap token
// without it is denied; a node's request is left pending. Every other CSR
// is left alone. The Reconciler applies the decisions through the
// approval subresource.
package approver
