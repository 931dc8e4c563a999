package executor

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/podspec"
)

// runtimeClassResource names RuntimeClasses in errors as the API server
// does: runtimeclass.node.k8s.io "x" not found.
var runtimeClassResource = schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclass"}

// isolation decides what a new sandbox of pod runs with: the runtime
// handler of its RuntimeClass and its user namespace. An error says why
// the pod cannot get what it asks for, in the kubelet's words where it
// has them; the sandbox is then not created, and the pod is tried again.
func (e *Executor) isolation(ctx context.Context, pod *v1.Pod) (string, *runtimeapi.UserNamespace, error) {
	handler, err := e.runtimeHandler(ctx, pod)
	if err != nil {
		return "", nil, err
	}
	features, featuresErr := e.features(ctx)
	if featuresErr == nil && !features.HasHandler(handler) {
		return "", nil, fmt.Errorf("RuntimeHandler %q not supported", handler)
	}
	support := criconfig.UserNamespaceSupport{
		Handler:     featuresErr == nil && features.UserNamespaces(handler) && e.UserNamespaces != nil,
		HostNetwork: featuresErr == nil && features.UserNamespacesHostNetwork,
	}
	if err := criconfig.CheckUserNamespace(pod, handler, support); err != nil {
		if featuresErr != nil {
			return "", nil, fmt.Errorf("%w: %w", err, featuresErr)
		}
		return "", nil, err
	}
	userns, err := e.userNamespace(pod)
	if err != nil {
		return "", nil, err
	}
	return handler, userns, nil
}

// runtimeHandler returns the handler of the pod's RuntimeClass; a pod
// without one runs in the runtime's default handler ("").
func (e *Executor) runtimeHandler(ctx context.Context, pod *v1.Pod) (string, error) {
	name := ""
	if pod.Spec.RuntimeClassName != nil {
		name = *pod.Spec.RuntimeClassName
	}
	if name == "" {
		return "", nil
	}
	if e.RuntimeClasses == nil {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: no RuntimeClass reader", name)
	}
	rc, err := e.RuntimeClasses.RuntimeClass(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return "", apierrors.NewNotFound(runtimeClassResource, name)
	case err != nil:
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", name, err)
	}
	return rc.Handler, nil
}

// recursiveReadOnly marks the mounts of c that its volume mounts ask to be
// read-only recursively, where the pod's runtime handler can make them so
// (podspec.RecursiveReadOnly). A runtime whose features cannot be read
// supports none.
func (e *Executor) recursiveReadOnly(ctx context.Context, pod *v1.Pod, c *v1.Container, mounts []*runtimeapi.Mount) error {
	if !podspec.WantsRecursiveReadOnly(c) {
		return nil
	}
	if _, err := e.runtimeHandler(ctx, pod); err != nil {
		return err
	}
	return criconfig.ApplyRecursiveReadOnly(c, mounts, e.SupportsRecursiveReadOnly(ctx, pod))
}

// SupportsRecursiveReadOnly reports whether the pod's runtime handler
// makes recursive read-only mounts; false when its RuntimeClass or the
// runtime's features cannot be read.
func (e *Executor) SupportsRecursiveReadOnly(ctx context.Context, pod *v1.Pod) bool {
	handler, err := e.runtimeHandler(ctx, pod)
	if err != nil {
		return false
	}
	features, err := e.features(ctx)
	return err == nil && features.Handlers[handler].RecursiveReadOnlyMounts
}

func (e *Executor) features(ctx context.Context) (cri.Features, error) {
	if e.Features == nil {
		return cri.Features{}, cri.ErrFeaturesUnknown
	}
	return e.Features.Features(ctx)
}

// userNamespace returns the user namespace options of the pod's sandbox
// and containers: its range for a pod that asks for its own (taken the
// first time), the node's otherwise.
func (e *Executor) userNamespace(pod *v1.Pod) (*runtimeapi.UserNamespace, error) {
	if !criconfig.WantsUserNamespace(pod) {
		return criconfig.UserNamespaceOptions(pod, criconfig.IDRange{}), nil
	}
	if e.UserNamespaces == nil {
		return nil, errors.New("can't set `spec.hostUsers: false`, no user namespace IDs are configured")
	}
	ids, err := e.UserNamespaces.IDs(pod.UID)
	if err != nil {
		return nil, fmt.Errorf("create user namespace: %w", err)
	}
	return criconfig.UserNamespaceOptions(pod, ids), nil
}
