package approver

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// usernameField indexes CSRs by requester, so that the other requests of
// a token are found without listing every CSR.
const usernameField = "spec.username"

// conflictRetry is how soon a CSR whose approval update conflicted is
// decided again, on its new version.
const conflictRetry = time.Second

// Reconciler applies Decide to the CSRs of the node client signer and
// DecideServing to those of the kubelet serving signer.
type Reconciler struct {
	Client client.Client
}

// SetupWithManager registers the requester index and the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &certificatesv1.CertificateSigningRequest{}, usernameField,
		func(o client.Object) []string {
			return []string{o.(*certificatesv1.CertificateSigningRequest).Spec.Username}
		}); err != nil {
		return fmt.Errorf("indexing certificate signing requests by requester: %w", err)
	}
	ourSigners := predicate.NewPredicateFuncs(func(o client.Object) bool {
		csr, ok := o.(*certificatesv1.CertificateSigningRequest)
		return ok && (csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName ||
			csr.Spec.SignerName == certificatesv1.KubeletServingSignerName)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("csr-approver").
		For(&certificatesv1.CertificateSigningRequest{}, builder.WithPredicates(ourSigners)).
		// A serving request waits for its Node's addresses: a change of
		// the Node decides its node's pending requests again.
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

// Reconcile decides on one CSR and records an Approved or Denied
// condition through the approval subresource. A conflict (the CSR
// changed, or another replica decided) is retried on the new version.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	d, err := r.decide(ctx, csr)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d.Verdict == Ignore {
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
	logger := log.FromContext(ctx)
	if d.Verdict == Approve {
		logger.Info("Approved certificate signing request", "csr", csr.Name, "requester", csr.Spec.Username, "reason", d.Reason, "message", d.Message)
	} else {
		logger.Info("Denied certificate signing request", "csr", csr.Name, "requester", csr.Spec.Username, "reason", d.Reason, "message", d.Message)
	}
	return ctrl.Result{}, nil
}

// decide reads what the decision on csr needs and makes it: for a client
// request, the other requests of its requester; for a serving request,
// its node's Node.
func (r *Reconciler) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (Decision, error) {
	if name := ServingNodeName(csr); name != "" {
		node := &corev1.Node{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			if apierrors.IsNotFound(err) {
				return DecideServing(csr, nil), nil
			}
			return Decision{}, fmt.Errorf("reading Node %s: %w", name, err)
		}
		return DecideServing(csr, node), nil
	}
	others := &certificatesv1.CertificateSigningRequestList{}
	if err := r.Client.List(ctx, others, client.MatchingFields{usernameField: csr.Spec.Username}); err != nil {
		return Decision{}, fmt.Errorf("listing the requests of %s: %w", csr.Spec.Username, err)
	}
	return Decide(csr, others.Items), nil
}
