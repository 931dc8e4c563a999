package manifests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/test/utils"
)

// splitObjects decodes a rendered configuration into its objects, in order.
func splitObjects(t *testing.T, rendered []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding rendered configuration: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// TestDefaultConfigurationApplies applies config/default to a real API
// server: the Namespace for real, then every object with a server-side
// dry run, so that the API server's validation and admission judge each
// one as `kubectl apply -k config/default` would. It also checks that the
// ClusterRoles the bindings name exist in a cluster or in config/default,
// since RBAC accepts a binding to a role that does not.
func TestDefaultConfigurationApplies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rendered := render(t, "../../config/default")
	objs := splitObjects(t, rendered)

	api, err := utils.StartAPIServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Stop(); err != nil {
			t.Error(err)
		}
	})
	admin, err := api.AdminClient()
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	var namespaces, rest bytes.Buffer
	for _, u := range objs {
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		to := &rest
		if u.GetKind() == "Namespace" {
			to = &namespaces
		}
		fmt.Fprintf(to, "---\n%s", b)
	}
	if namespaces.Len() == 0 {
		t.Fatal("config/default renders no Namespace")
	}
	for _, u := range objs {
		if u.GetKind() != "Namespace" {
			continue
		}
		// nodelet's pod is privileged with host paths: Pod Security's
		// baseline and restricted levels would refuse or flag it.
		for _, mode := range []string{"enforce", "audit", "warn"} {
			if got := u.GetLabels()["pod-security.kubernetes.io/"+mode]; got != "privileged" {
				t.Errorf("Namespace %s has pod-security.kubernetes.io/%s %q, want privileged", u.GetName(), mode, got)
			}
		}
	}
	kubectlApply(ctx, t, api, filepath.Join(dir, "namespaces.yaml"), namespaces.Bytes())
	out := kubectlApply(ctx, t, api, filepath.Join(dir, "objects.yaml"), rest.Bytes(), "--dry-run=server")
	t.Logf("server-side dry run:\n%s", out)
	if got, want := bytes.Count(out, []byte("(server dry run)")), len(objs)-1; got != want {
		t.Errorf("the dry run applied %d objects, want %d", got, want)
	}

	ownRoles := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "ClusterRole" {
			ownRoles[u.GetName()] = true
		}
	}
	for _, u := range objs {
		if u.GetKind() != "ClusterRoleBinding" && u.GetKind() != "RoleBinding" {
			continue
		}
		ref, _, _ := unstructured.NestedStringMap(u.Object, "roleRef")
		if ref["kind"] != "ClusterRole" || ownRoles[ref["name"]] {
			continue
		}
		var role rbacv1.ClusterRole
		if err := admin.Get(ctx, client.ObjectKey{Name: ref["name"]}, &role); err != nil {
			t.Errorf("%s %s binds ClusterRole %s: %v", u.GetKind(), u.GetName(), ref["name"], err)
		}
	}
}

// kubectlApply runs kubectl apply --server-side on the objects in data,
// written to path, and returns its output.
func kubectlApply(ctx context.Context, t *testing.T, api *utils.APIServer, path string, data []byte, extra ...string) []byte {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"apply", "--server-side", "--field-manager=nodelet-manifests-test", "-f", path}, extra...)
	cmd, err := api.Kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return out
}
