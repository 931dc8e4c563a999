package controller

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestOtherUID(t *testing.T) {
	pods := schema.GroupKind{Kind: "Pod"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"the UID is immutable", apierrors.NewInvalid(pods, "p", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "x", "field is immutable")}), true},
		{"wrapped", fmt.Errorf("patching: %w", apierrors.NewInvalid(pods, "p", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "x", "field is immutable")})), true},
		{"another field is invalid", apierrors.NewInvalid(pods, "p", field.ErrorList{field.Invalid(field.NewPath("status", "podIPs"), "x", "bad")}), false},
		{"a conflict", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("x")), false},
		{"not an API error", errors.New("metadata.uid"), false},
	} {
		if got := otherUID(tc.err); got != tc.want {
			t.Errorf("%s: otherUID = %v, want %v", tc.name, got, tc.want)
		}
	}
}
