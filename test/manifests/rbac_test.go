package manifests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nodelet/nodelet/test/utils"
)

// sensitive are the resources no binding may open to nodes or nodelet.
var sensitive = []string{"secrets", "configmaps"}

// builtinRoles are the cluster's default ClusterRoles that grant access to
// a sensitive resource, by what they grant.
var builtinRoles = map[string][]string{
	"system:node":   {"secrets", "configmaps"},
	"cluster-admin": {"*"},
	"admin":         {"secrets", "configmaps"},
	"edit":          {"secrets", "configmaps"},
	"view":          {"configmaps"},
}

// objects is a rendered configuration.
type objects struct {
	roles          map[string][]rbacv1.PolicyRule // "namespace/name"; "/name" for ClusterRoles
	aggregated     map[string]bool
	bindings       []binding
	serviceAccount rbacv1.Subject // the DaemonSet's
	approver       rbacv1.Subject // the CSR approver Deployment's
}

type binding struct {
	kind, namespace, name string
	roleRef               rbacv1.RoleRef
	subjects              []rbacv1.Subject
}

func decode(t *testing.T, rendered []byte) objects {
	t.Helper()
	o := objects{roles: map[string][]rbacv1.PolicyRule{}, aggregated: map[string]bool{}}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return o
			}
			t.Fatalf("decoding rendered configuration: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		into := func(v any) {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, v); err != nil {
				t.Fatalf("converting %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
		switch u.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			into(&r)
			o.roles["/"+r.Name] = r.Rules
			o.aggregated["/"+r.Name] = r.AggregationRule != nil
		case "Role":
			var r rbacv1.Role
			into(&r)
			o.roles[r.Namespace+"/"+r.Name] = r.Rules
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			into(&b)
			o.bindings = append(o.bindings, binding{kind: b.Kind, name: b.Name, roleRef: b.RoleRef, subjects: b.Subjects})
		case "RoleBinding":
			var b rbacv1.RoleBinding
			into(&b)
			o.bindings = append(o.bindings, binding{kind: b.Kind, namespace: b.Namespace, name: b.Name, roleRef: b.RoleRef, subjects: b.Subjects})
		case "DaemonSet":
			var ds appsv1.DaemonSet
			into(&ds)
			sa := ds.Spec.Template.Spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			o.serviceAccount = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ds.Namespace, Name: sa}
		case "Deployment":
			var d appsv1.Deployment
			into(&d)
			if slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "csr-approver") {
				sa := d.Spec.Template.Spec.ServiceAccountName
				if sa == "" {
					sa = "default"
				}
				o.approver = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: d.Namespace, Name: sa}
			}
		}
	}
}

// coversNodelet reports whether a subject includes the nodes or nodelet's
// ServiceAccount.
func (o objects) coversNodelet(s rbacv1.Subject) bool {
	switch s.Kind {
	case rbacv1.GroupKind:
		return slices.Contains([]string{"system:nodes", "system:authenticated", "system:serviceaccounts",
			"system:serviceaccounts:" + o.serviceAccount.Namespace}, s.Name)
	case rbacv1.UserKind:
		return strings.HasPrefix(s.Name, "system:node:") ||
			s.Name == fmt.Sprintf("system:serviceaccount:%s:%s", o.serviceAccount.Namespace, o.serviceAccount.Name)
	case rbacv1.ServiceAccountKind:
		return s.Namespace == o.serviceAccount.Namespace && s.Name == o.serviceAccount.Name
	}
	return false
}

// grants returns the sensitive resources a role grants any verb on.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		if len(r.Verbs) == 0 || !(slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")) {
			continue
		}
		for _, res := range sensitive {
			if (slices.Contains(r.Resources, res) || slices.Contains(r.Resources, "*")) && !slices.Contains(out, res) {
				out = append(out, res)
			}
		}
	}
	return out
}

// violations lists the bindings that give the nodes or nodelet access to
// Secrets or ConfigMaps.
func (o objects) violations() []string {
	var out []string
	for _, b := range o.bindings {
		if !slices.ContainsFunc(b.subjects, o.coversNodelet) {
			continue
		}
		key := "/" + b.roleRef.Name
		if b.roleRef.Kind == "Role" {
			key = b.namespace + "/" + b.roleRef.Name
		}
		var granted []string
		switch rules, ok := o.roles[key]; {
		case ok && o.aggregated[key]:
			granted = []string{"whatever its aggregated roles grant"}
		case ok:
			granted = grants(rules)
		case b.roleRef.Kind == "ClusterRole" && builtinRoles[b.roleRef.Name] != nil:
			granted = builtinRoles[b.roleRef.Name]
		default:
			granted = []string{"an unknown role's rules"}
		}
		if len(granted) > 0 {
			out = append(out, fmt.Sprintf("%s %s/%s binds %s %s, which grants %v", b.kind, b.namespace, b.name,
				b.roleRef.Kind, b.roleRef.Name, granted))
		}
	}
	return out
}

func render(t *testing.T, dir string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	assets, err := utils.EnvtestAssets(ctx)
	if err != nil {
		t.Fatalf("finding kubectl: %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v: %s", dir, err, stderr.String())
	}
	return out
}

func TestDefaultConfigurationGrantsNoSecretsOrConfigMaps(t *testing.T) {
	o := decode(t, render(t, "../../config/default"))
	if o.serviceAccount.Name == "" {
		t.Fatal("config/default renders no nodelet DaemonSet")
	}
	for _, v := range o.violations() {
		t.Error(v)
	}
}

// TestViolationsAreFound feeds the check bindings it must refuse, so that a
// passing check of config/default means something.
func TestViolationsAreFound(t *testing.T) {
	const daemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nodelet, namespace: nodelet-system}
spec: {template: {spec: {containers: []}}}
`
	cases := []struct {
		name, yaml string
		want       int
	}{
		{"system:node bound to the nodes' group", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nodelet-nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:nodes}]
`, 1},
		{"own role with secrets bound to the ServiceAccount", `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: nodelet-system}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: b, namespace: nodelet-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: default, namespace: nodelet-system}]
`, 1},
		{"wildcard cluster role bound to a node user", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: all}
rules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: all}
subjects: [{kind: User, name: "system:node:n1"}]
`, 1},
		{"harmless role bound to the nodes", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: pods}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pods}
subjects: [{kind: Group, name: system:nodes}]
`, 0},
		{"system:node bound to someone else", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node}
subjects: [{kind: User, name: alice}]
`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decode(t, []byte(daemonSet+"---\n"+tc.yaml)).violations()
			if len(got) != tc.want {
				t.Fatalf("violations = %q, want %d", got, tc.want)
			}
		})
	}
}

// TestBootstrapGrantsOnlyNodeletTokens: config/default grants the TLS
// bootstrap rights to bootstrap tokens made for nodelet only, never to
// every bootstrap token of the cluster or to the nodes, and binds nothing
// to nodelet's ServiceAccount.
func TestBootstrapGrantsOnlyNodeletTokens(t *testing.T) {
	o := decode(t, render(t, "../../config/default"))
	const nodeletTokens = "system:bootstrappers:nodelet"
	for _, b := range o.bindings {
		if _, ok := approvalPermissions[b.roleRef.Name]; ok {
			continue // TestApprovalPermissions
		}
		for _, s := range b.subjects {
			if s == o.approver {
				continue // TestApproverIsLeastPrivileged
			}
			if s.Kind != rbacv1.GroupKind || s.Name != nodeletTokens {
				t.Errorf("%s %s binds %s to %s %s; config/default binds only to group %s and the approver", b.kind, b.name,
					b.roleRef.Name, s.Kind, s.Name, nodeletTokens)
			}
			if s.Kind == rbacv1.GroupKind && b.roleRef.Name != "system:node-bootstrapper" {
				t.Errorf("%s %s binds %s to group %s; bootstrap tokens may only create and read CSRs (system:node-bootstrapper)",
					b.kind, b.name, b.roleRef.Name, s.Name)
			}
		}
	}
}

// approvalPermissions are config/approver's permission roles, by the
// group each is bound to: the approver approves a request only when its
// requester has the role's permission, in nodelet's own API group, which
// no other approver checks.
var approvalPermissions = map[string]struct{ subresource, group string }{
	"nodelet:csr-approval:nodeclient":      {"nodeclient", "system:bootstrappers:nodelet"},
	"nodelet:csr-approval:selfnodeclient":  {"selfnodeclient", "system:nodes"},
	"nodelet:csr-approval:selfnodeserving": {"selfnodeserving", "system:nodes"},
}

// TestApprovalPermissions: each permission role grants create on its
// subresource of certificatesigningrequests in certificates.nodelet.io
// and nothing else, and is bound to its group only.
func TestApprovalPermissions(t *testing.T) {
	o := decode(t, render(t, "../../config/default"))
	bound := map[string]bool{}
	for name, want := range approvalPermissions {
		rules := []rbacv1.PolicyRule{{APIGroups: []string{"certificates.nodelet.io"},
			Resources: []string{"certificatesigningrequests/" + want.subresource}, Verbs: []string{"create"}}}
		if got := o.roles["/"+name]; !equalRules(got, rules) {
			t.Errorf("ClusterRole %s has rules %+v, want %+v", name, got, rules)
		}
	}
	for _, b := range o.bindings {
		want, ok := approvalPermissions[b.roleRef.Name]
		if !ok {
			continue
		}
		if b.roleRef.Kind != "ClusterRole" || b.kind != "ClusterRoleBinding" {
			t.Errorf("%s %s binds %s %s; want a ClusterRoleBinding", b.kind, b.name, b.roleRef.Kind, b.roleRef.Name)
		}
		for _, s := range b.subjects {
			if s.Kind != rbacv1.GroupKind || s.Name != want.group {
				t.Errorf("%s %s binds %s to %s %s; want group %s only", b.kind, b.name, b.roleRef.Name, s.Kind, s.Name, want.group)
			}
		}
		bound[b.roleRef.Name] = true
	}
	for name := range approvalPermissions {
		if !bound[name] {
			t.Errorf("nothing binds ClusterRole %s", name)
		}
	}
}

// autoApprovalRoles are the controller-manager's approval roles: bound to
// a bootstrap token, nodeclient approves its request for any node name.
var autoApprovalRoles = []string{
	"system:certificates.k8s.io:certificatesigningrequests:nodeclient",
	"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
}

// TestNoAutoApprovalByTheControllerManager: nothing in config/default has
// the controller-manager approve a node client request: a token could
// then get a certificate for any node name.
func TestNoAutoApprovalByTheControllerManager(t *testing.T) {
	o := decode(t, render(t, "../../config/default"))
	for _, b := range o.bindings {
		if slices.Contains(autoApprovalRoles, b.roleRef.Name) {
			t.Errorf("%s %s binds %s: the controller-manager would approve node client certificates for any name", b.kind, b.name, b.roleRef.Name)
		}
	}
}

// approverRules are all the approver may do: read CSRs, set their
// approval, approve for the node client and kubelet serving signers only,
// review a requester's permission, read Nodes (the opt-in label, the
// addresses a serving certificate may name and those of other Nodes),
// the kubernetes Service and the ServiceCIDRs (Service IPs are never
// approved); in its namespace, hold its leader Lease and record Events.
var approverRules = map[string][]rbacv1.PolicyRule{
	"ClusterRole": {
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{"kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"}, Verbs: []string{"approve"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{"kubernetes"}, Verbs: []string{"get"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"servicecidrs"}, Verbs: []string{"list"}},
	},
	"Role": {
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	},
}

// TestApproverIsLeastPrivileged: the CSR approver's ServiceAccount gets
// exactly approverRules, through roles of config/default: no Secrets, no
// wildcards, no other signer, nothing namespaced outside its namespace.
func TestApproverIsLeastPrivileged(t *testing.T) {
	o := decode(t, render(t, "../../config/default"))
	if o.approver.Name == "" {
		t.Fatal("config/default renders no csr-approver Deployment")
	}
	got := map[string][]rbacv1.PolicyRule{}
	for _, b := range o.bindings {
		if !slices.Contains(b.subjects, o.approver) {
			continue
		}
		key := "/" + b.roleRef.Name
		if b.roleRef.Kind == "Role" {
			key = b.namespace + "/" + b.roleRef.Name
			if b.namespace != o.approver.Namespace {
				t.Errorf("RoleBinding %s/%s is outside the approver's namespace %s", b.namespace, b.name, o.approver.Namespace)
			}
		}
		rules, ok := o.roles[key]
		if !ok || o.aggregated[key] {
			t.Errorf("%s %s binds %s %s, which config/default does not define with rules of its own", b.kind, b.name, b.roleRef.Kind, b.roleRef.Name)
			continue
		}
		for _, r := range rules {
			for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
				if slices.Contains(list, "*") {
					t.Errorf("%s %s has a wildcard: %+v", b.roleRef.Kind, b.roleRef.Name, r)
				}
			}
			if slices.Contains(r.Resources, "secrets") {
				t.Errorf("%s %s grants Secrets: %+v", b.roleRef.Kind, b.roleRef.Name, r)
			}
		}
		got[b.roleRef.Kind] = append(got[b.roleRef.Kind], rules...)
	}
	for kind, want := range approverRules {
		if !equalRules(got[kind], want) {
			t.Errorf("the approver's %s rules are %+v, want %+v", kind, got[kind], want)
		}
	}
	if v := grants(append(got["ClusterRole"], got["Role"]...)); len(v) > 0 {
		t.Errorf("the approver may touch %v", v)
	}
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(a, b, func(x, y rbacv1.PolicyRule) bool {
		return slices.Equal(x.APIGroups, y.APIGroups) && slices.Equal(x.Resources, y.Resources) &&
			slices.Equal(x.Verbs, y.Verbs) && slices.Equal(x.ResourceNames, y.ResourceNames) && len(x.NonResourceURLs) == 0
	})
}
