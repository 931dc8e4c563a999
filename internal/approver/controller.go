package approver

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	// usernameField indexes CSRs by requester, so that a node's pending
	// serving requests are found without listing every CSR.
	usernameField = "spec.username"
	// signerNameField is the API server's field selector on a CSR's
	// signer.
	signerNameField = "spec.signerName"
	// addressField indexes Nodes by the addressKey of each address they
	// report, so that another Node's claim on a name is found without
	// listing every Node.
	addressField = "status.addresses"
)

// conflictRetry is how soon a CSR whose approval update conflicted is
// decided again, on its new version.
const conflictRetry = time.Second

// Reconciler applies Decide to the CSRs of the node client signer and
// DecideServing to those of the kubelet serving signer, checks the
// requester's permission for an approval with a SubjectAccessReview, and
// records the verdict through the approval subresource.
type Reconciler struct {
	// Client reads from the manager's cache and writes.
	Client client.Client
	// APIReader reads from the API server: what a bootstrap approval is
	// decided on, and the Service addresses, which are not cached.
	APIReader client.Reader
	// Policy says which names a serving certificate may hold.
	Policy ServingPolicy

	// bootstrapMu is held from reading a bootstrap token's requests to
	// recording the decision on one: a token gets at most one approval
	// even if two of its requests are reconciled at once.
	bootstrapMu sync.Mutex
}

// SetupWithManager registers the indexes and the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &certificatesv1.CertificateSigningRequest{}, usernameField,
		func(o client.Object) []string {
			return []string{o.(*certificatesv1.CertificateSigningRequest).Spec.Username}
		}); err != nil {
		return fmt.Errorf("indexing certificate signing requests by requester: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Node{}, addressField, func(o client.Object) []string {
		var keys []string
		for _, a := range o.(*corev1.Node).Status.Addresses {
			keys = append(keys, addressKey(a.Address))
		}
		return keys
	}); err != nil {
		return fmt.Errorf("indexing Nodes by address: %w", err)
	}
	ourSigners := predicate.NewPredicateFuncs(func(o client.Object) bool {
		csr, ok := o.(*certificatesv1.CertificateSigningRequest)
		return ok && (csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName ||
			csr.Spec.SignerName == certificatesv1.KubeletServingSignerName)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("csr-approver").
		For(&certificatesv1.CertificateSigningRequest{}, builder.WithPredicates(ourSigners)).
		// A serving request waits for its Node's label and addresses: a
		// change of the Node decides its node's pending requests again.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.servingRequestsOf)).
		Complete(r)
}

// servingRequestsOf lists the pending serving requests of node o.
func (r *Reconciler) servingRequestsOf(ctx context.Context, o client.Object) []reconcile.Request {
	list := &certificatesv1.CertificateSigningRequestList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{usernameField: nodeUserPrefix + o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "Unable to list the certificate signing requests of a node", "node", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if ServingNodeName(&list.Items[i]) != "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// Reconcile decides on one CSR, checks the requester's permission for an
// approval, and records an Approved or Denied condition through the
// approval subresource. A conflict (the CSR changed, or another replica
// decided) is retried on the new version.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var d Decision
	var err error
	switch {
	case ServingNodeName(csr) != "":
		d, err = r.decideServing(ctx, csr)
	case csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && isNodeletBootstrapper(csr):
		// Held until the decision is recorded: the next request of the
		// token is decided on a list that holds this one's approval.
		r.bootstrapMu.Lock()
		defer r.bootstrapMu.Unlock()
		d, err = r.decideBootstrap(ctx, csr)
	default:
		d = Decide(csr, nil)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if d.Verdict == Approve {
		allowed, why, err := r.permitted(ctx, csr, d.Permission)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !allowed {
			d = notPermitted(csr, d.Permission, why)
		}
	}
	if d.Verdict == Ignore {
		if d.Message != "" {
			logger.Info("Leaving certificate signing request pending", "csr", csr.Name, "requester", csr.Spec.Username, "why", d.Message)
		}
		return ctrl.Result{}, nil
	}
	condition := certificatesv1.CertificateSigningRequestCondition{
		Type:           certificatesv1.CertificateApproved,
		Status:         corev1.ConditionTrue,
		Reason:         d.Reason,
		Message:        d.Message,
		LastUpdateTime: metav1.Now(),
	}
	if d.Verdict == Deny {
		condition.Type = certificatesv1.CertificateDenied
	}
	csr.Status.Conditions = append(csr.Status.Conditions, condition)
	if err := r.Client.SubResource("approval").Update(ctx, csr); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, fmt.Errorf("recording %s of certificate signing request %s: %w", d.Verdict, csr.Name, err)
	}
	if d.Verdict == Approve {
		logger.Info("Approved certificate signing request", "csr", csr.Name, "requester", csr.Spec.Username, "reason", d.Reason, "message", d.Message)
	} else {
		logger.Info("Denied certificate signing request", "csr", csr.Name, "requester", csr.Spec.Username, "reason", d.Reason, "message", d.Message)
	}
	return ctrl.Result{}, nil
}

// decideBootstrap decides on a nodelet bootstrap token's request, and
// replaces csr with it, as the API server has it now, with the token's
// other requests as the API server has them now, not as the cache has
// them: a cache that has not yet seen the approval of the token's first
// request would let a second one through.
func (r *Reconciler) decideBootstrap(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (Decision, error) {
	live := &certificatesv1.CertificateSigningRequest{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(csr), live); err != nil {
		if apierrors.IsNotFound(err) {
			return Decision{}, nil
		}
		return Decision{}, fmt.Errorf("reading certificate signing request %s: %w", csr.Name, err)
	}
	// The decision, and the approval update, are on the request as it is
	// now: one the cache still shows pending may be decided already.
	*csr = *live
	all := &certificatesv1.CertificateSigningRequestList{}
	if err := r.APIReader.List(ctx, all, client.MatchingFields{signerNameField: certificatesv1.KubeAPIServerClientKubeletSignerName}); err != nil {
		return Decision{}, fmt.Errorf("listing the node client certificate signing requests: %w", err)
	}
	return Decide(csr, all.Items), nil
}

// decideServing reads what DecideServing needs for csr and decides. Only
// for a Node an admin opted in does it read the Service addresses and the
// other Nodes.
func (r *Reconciler) decideServing(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (Decision, error) {
	name := ServingNodeName(csr)
	facts := ServingFacts{Policy: r.Policy}
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return Decision{}, fmt.Errorf("reading Node %s: %w", name, err)
		}
		node = nil
	}
	facts.Node = node
	if !ServingApproved(node) {
		return DecideServing(csr, facts), nil
	}
	facts.OtherNodes = map[string]string{}
	for _, key := range ServingNames(csr) {
		nodes := &corev1.NodeList{}
		if err := r.Client.List(ctx, nodes, client.MatchingFields{addressField: key}); err != nil {
			return Decision{}, fmt.Errorf("listing the Nodes with address %s: %w", key, err)
		}
		for _, n := range nodes.Items {
			if n.Name != name {
				facts.OtherNodes[key] = n.Name
			}
		}
	}
	var err error
	if facts.ServiceIPs, err = r.apiServerServiceIPs(ctx); err != nil {
		return Decision{}, err
	}
	if facts.ServiceCIDRs, err = r.serviceCIDRs(ctx); err != nil {
		return Decision{}, err
	}
	return DecideServing(csr, facts), nil
}

// apiServerServiceIPs returns the ClusterIPs of Service default/kubernetes.
func (r *Reconciler) apiServerServiceIPs(ctx context.Context) ([]netip.Addr, error) {
	svc := &corev1.Service{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Service default/kubernetes: %w", err)
	}
	var out []netip.Addr
	for _, s := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// serviceCIDRs returns the ranges of the cluster's ServiceCIDR objects;
// none where the API server does not serve them.
func (r *Reconciler) serviceCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	list := &networkingv1.ServiceCIDRList{}
	if err := r.APIReader.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing the ServiceCIDRs: %w", err)
	}
	var out []netip.Prefix
	for _, s := range list.Items {
		for _, c := range s.Spec.CIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out, nil
}

// permitted asks the API server whether csr's requester may
// PermissionVerb the subresource sub of PermissionResource in
// PermissionGroup, and returns its answer with the reason it gave.
func (r *Reconciler) permitted(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, sub string) (bool, string, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range csr.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   csr.Spec.Username,
		UID:    csr.Spec.UID,
		Groups: csr.Spec.Groups,
		Extra:  extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group:       PermissionGroup,
			Resource:    PermissionResource,
			Subresource: sub,
			Verb:        PermissionVerb,
		},
	}}
	if err := r.Client.Create(ctx, sar); err != nil {
		return false, "", fmt.Errorf("reviewing the permission %s of %s: %w", sub, csr.Spec.Username, err)
	}
	return sar.Status.Allowed, sar.Status.Reason, nil
}

// notPermitted is the decision on csr, which the approver would approve,
// when its requester lacks the permission sub: a nodelet bootstrap
// token's request is denied, so that the joining node stops with the
// reason; a node's request is left pending.
func notPermitted(csr *certificatesv1.CertificateSigningRequest, sub, why string) Decision {
	msg := fmt.Sprintf("%s may not %s %s/%s in %s", csr.Spec.Username, PermissionVerb, PermissionResource, sub, PermissionGroup)
	if why != "" {
		msg += " (" + why + ")"
	}
	if isNodeletBootstrapper(csr) {
		return Decision{Verdict: Deny, Reason: ReasonNotAuthorized, Message: "Not auto approving: " + msg}
	}
	return Decision{Message: "Not auto approving: " + msg}
}
