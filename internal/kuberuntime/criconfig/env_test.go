package criconfig

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/kuberuntime/podtest"
)

func TestContainerEnv(t *testing.T) {
	cm := &v1.ConfigMap{Data: map[string]string{"b": "2", "a": "1"}}
	secret := &v1.Secret{Data: map[string][]byte{"token": []byte("s3cr3t")}}
	pod := podtest.NewPod(func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Annotations = map[string]string{"team": "core"}
		p.Spec.NodeName = "node-1"
		p.Spec.ServiceAccountName = "default"
	})
	opts := ContainerOptions{
		PodIPs:     []string{"10.0.0.5", "fd00::5"},
		HostIPs:    []string{"192.168.1.2"},
		ConfigMaps: map[string]*v1.ConfigMap{"cfg": cm},
		Secrets:    map[string]*v1.Secret{"sec": secret},
		ServiceEnv: map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "SVC": "svc"},
		NodeAllocatable: v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("4"),
			v1.ResourceMemory: resource.MustParse("8Gi"),
		},
	}
	field := func(path string) *v1.EnvVarSource {
		return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
	}
	res := func(name, divisor string) *v1.EnvVarSource {
		s := &v1.ResourceFieldSelector{Resource: name}
		if divisor != "" {
			s.Divisor = resource.MustParse(divisor)
		}
		return &v1.EnvVarSource{ResourceFieldRef: s}
	}
	limited := v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("100Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")},
	}
	tests := []struct {
		name    string
		c       v1.Container
		want    []EnvVar
		wantErr bool
	}{
		{name: "literal values expand earlier variables and services",
			c: v1.Container{Env: []v1.EnvVar{
				{Name: "A", Value: "a"}, {Name: "B", Value: "$(A)-$(SVC)-$(C)"}, {Name: "C", Value: "c"}, {Name: "E"},
			}},
			want: []EnvVar{{"A", "a"}, {"B", "a-svc-$(C)"}, {"C", "c"}, {"E", ""}, {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"SVC", "svc"}}},
		{name: "envFrom first, sorted, prefixed; env overrides in place",
			c: v1.Container{
				EnvFrom: []v1.EnvFromSource{
					{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
					{Prefix: "S_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
					{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: ptr.To(true)}},
				},
				Env: []v1.EnvVar{{Name: "a", Value: "override"}, {Name: "SVC", Value: "mine"}},
			},
			want: []EnvVar{{"a", "override"}, {"b", "2"}, {"S_token", "s3cr3t"}, {"SVC", "mine"}, {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}}},
		{name: "key references, optional ones skipped when missing",
			c: v1.Container{Env: []v1.EnvVar{
				{Name: "CM", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "a"}}},
				{Name: "SEC", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "token"}}},
				{Name: "OPTKEY", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "zz", Optional: ptr.To(true)}}},
				{Name: "OPTOBJ", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Key: "k", Optional: ptr.To(true)}}},
			}},
			want: []EnvVar{{"CM", "1"}, {"SEC", "s3cr3t"}, {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"SVC", "svc"}}},
		{name: "missing configmap", wantErr: true,
			c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Key: "a"}}}}}},
		{name: "missing secret key", wantErr: true,
			c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "nope"}}}}}},
		{name: "missing envFrom secret", wantErr: true,
			c: v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}}}}}},
		{name: "downward API fields",
			c: v1.Container{Env: []v1.EnvVar{
				{Name: "NAME", ValueFrom: field("metadata.name")},
				{Name: "NS", ValueFrom: field("metadata.namespace")},
				{Name: "UID", ValueFrom: field("metadata.uid")},
				{Name: "LABEL", ValueFrom: field("metadata.labels['app']")},
				{Name: "ANN", ValueFrom: field("metadata.annotations['team']")},
				{Name: "NODE", ValueFrom: field("spec.nodeName")},
				{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
				{Name: "IP", ValueFrom: field("status.podIP")},
				{Name: "IPS", ValueFrom: field("status.podIPs")},
				{Name: "HOST", ValueFrom: field("status.hostIP")},
				{Name: "HOSTS", ValueFrom: field("status.hostIPs")},
			}},
			want: []EnvVar{{"NAME", "web"}, {"NS", "default"}, {"UID", "uid-1"}, {"LABEL", "web"}, {"ANN", "core"},
				{"NODE", "node-1"}, {"SA", "default"}, {"IP", "10.0.0.5"}, {"IPS", "10.0.0.5,fd00::5"},
				{"HOST", "192.168.1.2"}, {"HOSTS", "192.168.1.2"}, {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"SVC", "svc"}}},
		{name: "unsupported field", wantErr: true,
			c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: field("spec.hostname")}}}},
		{name: "resource fields round up and default limits to the node",
			c: v1.Container{Resources: limited, Env: []v1.EnvVar{
				{Name: "CPU_LIMIT", ValueFrom: res("limits.cpu", "")},
				{Name: "CPU_LIMIT_M", ValueFrom: res("limits.cpu", "1m")},
				{Name: "CPU_REQ", ValueFrom: res("requests.cpu", "")},
				{Name: "MEM_REQ_MI", ValueFrom: res("requests.memory", "1Mi")},
				{Name: "MEM_LIMIT_GI", ValueFrom: res("limits.memory", "1Gi")},
			}},
			want: []EnvVar{{"CPU_LIMIT", "2"}, {"CPU_LIMIT_M", "1500"}, {"CPU_REQ", "1"}, {"MEM_REQ_MI", "100"}, {"MEM_LIMIT_GI", "8"},
				{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"SVC", "svc"}}},
		{name: "unsupported resource", wantErr: true,
			c: v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: res("cpu", "")}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.Name = "app"
			got, err := ContainerEnv(pod, &c, opts)
			if tt.wantErr {
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want a *ConfigError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ContainerEnv: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContainerEnvHostNetworkPodIP(t *testing.T) {
	pod := podtest.NewPod(func(p *v1.Pod) { p.Spec.HostNetwork = true })
	c := v1.Container{Name: "app", Env: []v1.EnvVar{{Name: "IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}}
	got, err := ContainerEnv(pod, &c, ContainerOptions{HostIPs: []string{"192.168.1.2"}})
	if err != nil || len(got) != 1 || got[0].Value != "192.168.1.2" {
		t.Errorf("got %v, %v; want the host IP", got, err)
	}
}

func TestExpandSubPathExpr(t *testing.T) {
	env := []EnvVar{{"POD_NAME", "web-0"}, {"NS", "prod"}, {"EMPTY", ""}, {"UP", ".."}, {"ABS", "/tmp"}, {"DOLLAR", "$(NS)"}}
	tests := []struct {
		expr, want, wantErr string
	}{
		{expr: "$(POD_NAME)", want: "web-0"},
		{expr: "logs/$(NS)/$(POD_NAME)", want: "logs/prod/web-0"},
		{expr: "plain", want: "plain"},
		{expr: "$$(POD_NAME)", want: "$(POD_NAME)"},
		{expr: "$$$(NS)", want: "$prod"},
		{expr: "a$b", want: "a$b"},
		{expr: "$(NS", want: "$(NS"},
		// A value is used as it is, never expanded again.
		{expr: "$(DOLLAR)", want: "$(NS)"},
		// Expansion does not validate: ".." and absolute values come
		// through, for the volume manager to refuse.
		{expr: "$(UP)", want: ".."},
		{expr: "$(ABS)", want: "/tmp"},
		{expr: "$(MISSING)", wantErr: "missing value for MISSING"},
		{expr: "$(EMPTY)/x", wantErr: "missing value for EMPTY"},
		{expr: "$(Z)/$(EMPTY)/$(Z)/$(POD_NAME)", wantErr: "missing value for EMPTY, Z"},
	}
	checkSubPathExpansions(t, env, tests)
}

// TestExpandSubPathExprWithContainerEnv expands with the environment the
// container gets: downward API values resolved as for env, a later
// definition winning, service variables included.
func TestExpandSubPathExprWithContainerEnv(t *testing.T) {
	pod := podtest.NewPod(func(p *v1.Pod) { p.Annotations = map[string]string{"path": "mypath"} })
	field := func(path string) *v1.EnvVarSource {
		return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	c := v1.Container{Name: "app", Env: []v1.EnvVar{
		{Name: "POD_NAME", ValueFrom: field("metadata.name")},
		{Name: "POD_IP", ValueFrom: field("status.podIP")},
		{Name: "ANNOTATION", ValueFrom: field("metadata.annotations['path']")},
		{Name: "NOT_SET", ValueFrom: field("metadata.annotations['other']")},
		{Name: "DIR", Value: "first"},
		{Name: "DIR", Value: "$(POD_NAME)-dir"},
	}}
	env, err := ContainerEnv(pod, &c, ContainerOptions{PodIPs: []string{"10.0.0.5"}, ServiceEnv: map[string]string{"SVC_HOST": "10.96.0.9"}})
	if err != nil {
		t.Fatalf("ContainerEnv: %v", err)
	}
	tests := []struct{ expr, want, wantErr string }{
		{expr: "$(ANNOTATION)/$(POD_NAME)", want: "mypath/web"},
		{expr: "$(POD_IP)", want: "10.0.0.5"},
		{expr: "$(DIR)", want: "web-dir"},
		{expr: "$(SVC_HOST)", want: "10.96.0.9"},
		{expr: "$(NOT_SET)/$(POD_NAME)", wantErr: "missing value for NOT_SET"},
	}
	checkSubPathExpansions(t, env, tests)
}

// TestContainerConfigUsesResolvedEnv: an environment the caller resolved
// (to expand subPathExpr with it) is the one the container gets, not
// resolved a second time.
func TestContainerConfigUsesResolvedEnv(t *testing.T) {
	pod := podtest.NewPod()
	c := v1.Container{Name: "app", Image: "busybox:1", Command: []string{"echo", "$(X)"},
		Env: []v1.EnvVar{{Name: "X", Value: "from-spec"}}}
	for _, tt := range []struct {
		name string
		env  []EnvVar
		want string
	}{
		{name: "resolved by the caller", env: []EnvVar{{Name: "X", Value: "resolved"}}, want: "resolved"},
		{name: "resolved here", want: "from-spec"},
	} {
		cfg, err := ContainerConfig(pod, &c, ContainerOptions{Env: tt.env})
		if err != nil {
			t.Fatalf("%s: ContainerConfig: %v", tt.name, err)
		}
		if len(cfg.Envs) != 1 || string(cfg.Envs[0].Value) != tt.want || cfg.Command[1] != tt.want {
			t.Errorf("%s: envs %v, command %v; want X=%s", tt.name, cfg.Envs, cfg.Command, tt.want)
		}
	}
}

// checkSubPathExpansions expands each expression with env and compares the
// result or the error.
func checkSubPathExpansions(t *testing.T, env []EnvVar, tests []struct{ expr, want, wantErr string }) {
	t.Helper()
	for _, tt := range tests {
		got, err := ExpandSubPathExpr(tt.expr, env)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("ExpandSubPathExpr(%q) = %q, %v; want error %q", tt.expr, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ExpandSubPathExpr(%q) = %q, %v; want %q", tt.expr, got, err, tt.want)
		}
	}
}

func TestDeviceEnvInCommandAndArgs(t *testing.T) {
	pod := podtest.NewPod(podtest.Modify("app", func(c *v1.Container) {
		c.Command = []string{"/bin/sh", "-c"}
		c.Args = []string{"echo $(GPU) $(SHARED) $(OWN)"}
		c.Env = []v1.EnvVar{{Name: "SHARED", Value: "mine"}, {Name: "OWN", Value: "$(GPU)"}}
	}))
	opts := ContainerOptions{DeviceEnv: map[string]string{"GPU": "gpu-0", "SHARED": "plugin's"}}
	cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], opts)
	if err != nil {
		t.Fatal(err)
	}
	// The plugin's variables expand in args, below the container's own;
	// the container's own values do not see them (OWN stays literal).
	if got, want := cfg.Args[0], "echo gpu-0 mine $(GPU)"; got != want {
		t.Errorf("args %q, want %q", got, want)
	}
}
