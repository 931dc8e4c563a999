package approver

import (
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Verdict is what the approver does with a CSR.
type Verdict int

const (
	// Ignore leaves the CSR to others: not nodelet's, or decided already.
	Ignore Verdict = iota
	// Approve adds the Approved condition.
	Approve
	// Deny adds the Denied condition.
	Deny
)

func (v Verdict) String() string {
	switch v {
	case Approve:
		return "Approve"
	case Deny:
		return "Deny"
	default:
		return "Ignore"
	}
}

// Reasons of the conditions the approver sets. AutoApproved is the
// controller-manager's reason for an automatic approval.
const (
	ReasonAutoApproved = "AutoApproved"
	// ReasonInvalidRequest: the request is not a node client certificate
	// request as nodelet makes it.
	ReasonInvalidRequest = "InvalidRequest"
	// ReasonNoNodeBinding: the bootstrap token is bound to no node, or to
	// more than one.
	ReasonNoNodeBinding = "NoNodeBinding"
	// ReasonNodeNameMismatch: the token is bound to another node.
	ReasonNodeNameMismatch = "NodeNameMismatch"
	// ReasonTokenAlreadyUsed: the token already had a request approved,
	// or made an earlier one that is waiting.
	ReasonTokenAlreadyUsed = "TokenAlreadyUsed"
	// ReasonNotAuthorized: the token lacks the permission
	// SubresourceNodeClient.
	ReasonNotAuthorized = "NotAuthorized"
)

// The permissions the approver checks with a SubjectAccessReview before
// it approves, as the controller-manager's approver checks create on
// certificatesigningrequests/nodeclient and /selfnodeclient in
// certificates.k8s.io: verb PermissionVerb on PermissionResource, with
// one of the subresources below, in PermissionGroup. The group is
// nodelet's own, so that granting one of them never lets another approver
// act: the controller-manager approves a bootstrap token's nodeclient
// request for any node name.
const (
	PermissionGroup    = "certificates.nodelet.io"
	PermissionResource = "certificatesigningrequests"
	PermissionVerb     = "create"
	// SubresourceNodeClient: a bootstrap token's request for the client
	// certificate of the node it is bound to.
	SubresourceNodeClient = "nodeclient"
	// SubresourceSelfNodeClient: a node's renewal of its own client
	// certificate.
	SubresourceSelfNodeClient = "selfnodeclient"
	// SubresourceSelfNodeServing: a node's request for its own serving
	// certificate.
	SubresourceSelfNodeServing = "selfnodeserving"
)

// Decision is the verdict on a CSR with the reason and message of the
// condition to set (for Ignore, Reason is empty and Message may say why),
// and for Approve the permission the requester needs for the approval to
// stand.
type Decision struct {
	Verdict Verdict
	Reason  string
	Message string
	// Permission is the subresource of PermissionResource in
	// PermissionGroup that the requester must be allowed to
	// PermissionVerb (a SubjectAccessReview) for an Approve to be carried
	// out; empty otherwise.
	Permission string
}

// nodeClientUsages are the usage sets of a node client certificate: RSA
// keys add key encipherment.
var nodeClientUsages = [][]certificatesv1.KeyUsage{
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
}

// Decide decides on csr, given the other CSRs of the cluster (at least
// those of the same requester; csr itself among them is skipped).
//
// Only requests to kubernetes.io/kube-apiserver-client-kubelet without an
// Approved, Denied or Failed condition are decided. From a nodelet
// bootstrap token (user system:bootstrap:<id> in BootstrappersGroup) a
// node client request for the node the token is bound to is approved when
// no other request of the token was approved and no earlier valid one is
// waiting; anything else from such a token is denied. From a node
// (system:node:<name> in system:nodes) a node client request for its own
// name is approved; any other is left alone, as is every request from
// anyone else. An approval of a token's request needs the token's
// permission SubresourceNodeClient, of a node's SubresourceSelfNodeClient.
func Decide(csr *certificatesv1.CertificateSigningRequest, others []certificatesv1.CertificateSigningRequest) Decision {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || decided(csr) {
		return Decision{}
	}
	switch {
	case isNodeletBootstrapper(csr):
		if d := checkBootstrap(csr); d.Verdict == Deny {
			return d
		}
		return firstOfToken(csr, others)
	case isNode(csr):
		name, err := nodeClientName(csr)
		if err != nil || csr.Spec.Username != nodeUserPrefix+name {
			return Decision{}
		}
		return Decision{Verdict: Approve, Reason: ReasonAutoApproved, Permission: SubresourceSelfNodeClient,
			Message: fmt.Sprintf("Auto approving the renewal of node %s's own client certificate", name)}
	}
	return Decision{}
}

// checkBootstrap decides on a request of a nodelet bootstrap token by
// itself, without looking at the token's other requests: Deny, or Approve
// for now.
func checkBootstrap(csr *certificatesv1.CertificateSigningRequest) Decision {
	name, err := nodeClientName(csr)
	if err != nil {
		return Decision{Verdict: Deny, Reason: ReasonInvalidRequest,
			Message: fmt.Sprintf("Not a node client certificate request that nodelet makes: %v", err)}
	}
	var bindings []string
	for _, g := range csr.Spec.Groups {
		if isNodeGroup(g) {
			bindings = append(bindings, g)
		}
	}
	if len(bindings) != 1 {
		return Decision{Verdict: Deny, Reason: ReasonNoNodeBinding,
			Message: fmt.Sprintf("Bootstrap token user %s is bound to %d nodes (groups %v), not exactly one", csr.Spec.Username, len(bindings), bindings)}
	}
	if bindings[0] != NodeGroup(name) {
		return Decision{Verdict: Deny, Reason: ReasonNodeNameMismatch,
			Message: fmt.Sprintf("Bootstrap token user %s is bound to another node (group %s) and may not get a certificate for node %s", csr.Spec.Username, bindings[0], name)}
	}
	return Decision{Verdict: Approve, Reason: ReasonAutoApproved, Permission: SubresourceNodeClient,
		Message: fmt.Sprintf("Auto approving nodelet client certificate for node %s, the node bootstrap token user %s is bound to", name, csr.Spec.Username)}
}

// firstOfToken approves csr, which checkBootstrap approves by itself,
// unless another request of the same token was approved, or an earlier
// one that checkBootstrap approves is waiting: a token gets one client
// certificate, and the first valid request is the one.
func firstOfToken(csr *certificatesv1.CertificateSigningRequest, others []certificatesv1.CertificateSigningRequest) Decision {
	for i := range others {
		o := &others[i]
		if o.Name == csr.Name || o.Spec.Username != csr.Spec.Username || o.Spec.SignerName != csr.Spec.SignerName {
			continue
		}
		if hasCondition(o, certificatesv1.CertificateApproved) {
			return Decision{Verdict: Deny, Reason: ReasonTokenAlreadyUsed,
				Message: fmt.Sprintf("Bootstrap token user %s already had certificate signing request %s approved; a bootstrap token gets one client certificate", csr.Spec.Username, o.Name)}
		}
		if !decided(o) && earlier(o, csr) && checkBootstrap(o).Verdict == Approve {
			return Decision{Verdict: Deny, Reason: ReasonTokenAlreadyUsed,
				Message: fmt.Sprintf("Bootstrap token user %s made certificate signing request %s earlier; a bootstrap token gets one client certificate", csr.Spec.Username, o.Name)}
		}
	}
	return checkBootstrap(csr)
}

// nodeClientName returns the node name of a node client certificate
// request: it parses, its signature is valid, its subject is exactly
// CN=system:node:<name>, O=system:nodes with a valid node name, it has no
// subject alternative names, and its usages are a node client's.
func nodeClientName(csr *certificatesv1.CertificateSigningRequest) (string, error) {
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return "", err
	}
	name, ok := strings.CutPrefix(req.Subject.CommonName, nodeUserPrefix)
	if !ok {
		return "", fmt.Errorf("common name %q does not start with %q", req.Subject.CommonName, nodeUserPrefix)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("node name %q is invalid: %s", name, strings.Join(errs, "; "))
	}
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return "", fmt.Errorf("organization %q is not exactly [%s]", req.Subject.Organization, nodesGroup)
	}
	if !oneCNOneO(req.Subject) {
		return "", fmt.Errorf("subject %q has attributes other than one CN and one O", req.Subject)
	}
	if n := len(req.DNSNames) + len(req.IPAddresses) + len(req.EmailAddresses) + len(req.URIs); n > 0 {
		return "", fmt.Errorf("the request has %d subject alternative names, a node client certificate none", n)
	}
	if !slices.ContainsFunc(nodeClientUsages, func(want []certificatesv1.KeyUsage) bool { return sameUsages(csr.Spec.Usages, want) }) {
		return "", fmt.Errorf("usages %q are not a node client certificate's", csr.Spec.Usages)
	}
	return name, nil
}

// sameUsages reports whether got holds exactly the usages of want, each
// once.
func sameUsages(got, want []certificatesv1.KeyUsage) bool {
	if len(got) != len(want) {
		return false
	}
	for _, u := range want {
		if !slices.Contains(got, u) {
			return false
		}
	}
	return true
}

func isNodeletBootstrapper(csr *certificatesv1.CertificateSigningRequest) bool {
	return strings.HasPrefix(csr.Spec.Username, bootstrapUserPrefix) && slices.Contains(csr.Spec.Groups, BootstrappersGroup)
}

func isNode(csr *certificatesv1.CertificateSigningRequest) bool {
	return strings.HasPrefix(csr.Spec.Username, nodeUserPrefix) && slices.Contains(csr.Spec.Groups, nodesGroup)
}

// decided reports whether csr was approved, denied or failed.
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	return hasCondition(csr, certificatesv1.CertificateApproved) ||
		hasCondition(csr, certificatesv1.CertificateDenied) ||
		hasCondition(csr, certificatesv1.CertificateFailed)
}

func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	return slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == t
	})
}

// earlier reports whether a was created before b; names break ties.
func earlier(a, b *certificatesv1.CertificateSigningRequest) bool {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c < 0
	}
	return a.Name < b.Name
}
