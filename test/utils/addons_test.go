package utils

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// renderedAddons are the add-on objects decoded into their API types.
type renderedAddons struct {
	kubeProxySA     corev1.ServiceAccount
	kubeProxyCRB    rbacv1.ClusterRoleBinding
	kubeProxyConfig corev1.ConfigMap
	kubeProxy       appsv1.DaemonSet
	coreDNSSA       corev1.ServiceAccount
	coreDNSRole     rbacv1.ClusterRole
	coreDNSCRB      rbacv1.ClusterRoleBinding
	corefile        corev1.ConfigMap
	coreDNS         appsv1.Deployment
	kubeDNS         corev1.Service
}

// decodeAddons renders opts and decodes every object, refusing a field its
// type does not have, into the field of renderedAddons its kind and name
// pick; an object the test does not know fails it.
func decodeAddons(t *testing.T, opts AddonOptions) renderedAddons {
	t.Helper()
	objs, err := RenderAddons(opts)
	if err != nil {
		t.Fatal(err)
	}
	var r renderedAddons
	targets := map[string]any{
		"ServiceAccount/kube-proxy":               &r.kubeProxySA,
		"ClusterRoleBinding/nodelet:node-proxier": &r.kubeProxyCRB,
		"ConfigMap/kube-proxy":                    &r.kubeProxyConfig,
		"DaemonSet/kube-proxy":                    &r.kubeProxy,
		"ServiceAccount/coredns":                  &r.coreDNSSA,
		"ClusterRole/system:coredns":              &r.coreDNSRole,
		"ClusterRoleBinding/system:coredns":       &r.coreDNSCRB,
		"ConfigMap/coredns":                       &r.corefile,
		"Deployment/coredns":                      &r.coreDNS,
		"Service/kube-dns":                        &r.kubeDNS,
	}
	seen := map[string]bool{}
	for _, u := range objs {
		key := u.GetKind() + "/" + u.GetName()
		target, ok := targets[key]
		if !ok {
			t.Fatalf("unexpected object %s", key)
		}
		if seen[key] {
			t.Fatalf("%s appears twice", key)
		}
		seen[key] = true
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, target, true); err != nil {
			t.Fatalf("decoding %s: %v", key, err)
		}
		if u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" && u.GetNamespace() != AddonsNamespace {
			t.Errorf("%s is in namespace %q, want %s", key, u.GetNamespace(), AddonsNamespace)
		}
	}
	for key := range targets {
		if !seen[key] {
			t.Errorf("the manifests have no %s", key)
		}
	}
	return r
}

// kubeProxyConfiguration is the part of kube-proxy's configuration the
// add-on relies on.
type kubeProxyConfiguration struct {
	APIVersion       string `json:"apiVersion"`
	Kind             string `json:"kind"`
	Mode             string `json:"mode"`
	ClusterCIDR      string `json:"clusterCIDR"`
	ClientConnection struct {
		Kubeconfig string `json:"kubeconfig"`
	} `json:"clientConnection"`
	Conntrack struct {
		MaxPerCore            *int32           `json:"maxPerCore"`
		TCPEstablishedTimeout *metav1.Duration `json:"tcpEstablishedTimeout"`
		TCPCloseWaitTimeout   *metav1.Duration `json:"tcpCloseWaitTimeout"`
	} `json:"conntrack"`
}

func TestRenderAddons(t *testing.T) {
	const url = "https://10.251.0.1:6443"
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	tests := []struct {
		name string
		opts AddonOptions
		// the addressing the objects must carry
		cidr, dnsIP, domain string
		// inline CA, or the projected volume's
		caData []byte
	}{
		{
			name:  "the shared addressing plan by default",
			opts:  AddonOptions{APIServerURL: url},
			cidr:  "10.244.0.0/16",
			dnsIP: "10.0.0.10", domain: "cluster.local",
		},
		{
			name: "another plan and an inline CA",
			opts: AddonOptions{
				APIServerURL: url, CAData: ca,
				ClusterCIDR: "10.88.0.0/16", DNSIP: "10.96.0.10", ClusterDomain: "example.test",
			},
			cidr: "10.88.0.0/16", dnsIP: "10.96.0.10", domain: "example.test",
			caData: ca,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodeAddons(t, tt.opts)
			checkKubeProxy(t, r, url, tt.cidr, tt.caData)
			checkCoreDNS(t, r, tt.dnsIP, tt.domain)
		})
	}
}

func checkKubeProxy(t *testing.T, r renderedAddons, url, cidr string, caData []byte) {
	t.Helper()
	if r.kubeProxyCRB.RoleRef.Name != "system:node-proxier" ||
		len(r.kubeProxyCRB.Subjects) != 1 || r.kubeProxyCRB.Subjects[0].Name != r.kubeProxySA.Name ||
		r.kubeProxyCRB.Subjects[0].Namespace != AddonsNamespace {
		t.Errorf("kube-proxy's binding = %+v, want system:node-proxier for kube-system/kube-proxy", r.kubeProxyCRB)
	}

	// The configuration, and the kubeconfig it names.
	var cfg kubeProxyConfiguration
	if err := yaml.Unmarshal([]byte(r.kubeProxyConfig.Data["config.conf"]), &cfg); err != nil {
		t.Fatalf("kube-proxy's config.conf: %v", err)
	}
	if cfg.Kind != "KubeProxyConfiguration" || cfg.APIVersion != "kubeproxy.config.k8s.io/v1alpha1" {
		t.Errorf("config.conf is a %s %s", cfg.APIVersion, cfg.Kind)
	}
	if cfg.Mode != "iptables" || cfg.ClusterCIDR != cidr {
		t.Errorf("mode %q clusterCIDR %q, want iptables %s", cfg.Mode, cfg.ClusterCIDR, cidr)
	}
	// Zero means "leave the sysctl alone"; unset would mean the default.
	c := cfg.Conntrack
	if c.MaxPerCore == nil || *c.MaxPerCore != 0 ||
		c.TCPEstablishedTimeout == nil || c.TCPEstablishedTimeout.Duration != 0 ||
		c.TCPCloseWaitTimeout == nil || c.TCPCloseWaitTimeout.Duration != 0 {
		t.Errorf("conntrack = %+v, want maxPerCore and the TCP timeouts set to zero", c)
	}
	kubeconfig, err := clientcmd.Load([]byte(r.kubeProxyConfig.Data["kubeconfig.conf"]))
	if err != nil {
		t.Fatalf("kube-proxy's kubeconfig.conf: %v", err)
	}
	kctx := kubeconfig.Contexts[kubeconfig.CurrentContext]
	if kctx == nil || kubeconfig.Clusters[kctx.Cluster] == nil || kubeconfig.AuthInfos[kctx.AuthInfo] == nil {
		t.Fatalf("kube-proxy's kubeconfig.conf has no complete current context: %+v", kubeconfig)
	}
	cluster, user := kubeconfig.Clusters[kctx.Cluster], kubeconfig.AuthInfos[kctx.AuthInfo]
	const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	if cluster.Server != url || user.TokenFile != saDir+"/token" {
		t.Errorf("kubeconfig server %q token file %q, want %s and the projected token", cluster.Server, user.TokenFile, url)
	}
	if caData != nil {
		if !bytes.Equal(cluster.CertificateAuthorityData, caData) || cluster.CertificateAuthority != "" {
			t.Errorf("kubeconfig CA data %q file %q, want the given CA inline", cluster.CertificateAuthorityData, cluster.CertificateAuthority)
		}
	} else if cluster.CertificateAuthority != saDir+"/ca.crt" || len(cluster.CertificateAuthorityData) != 0 {
		t.Errorf("kubeconfig CA file %q, want the projected ca.crt", cluster.CertificateAuthority)
	}

	// The DaemonSet: in the node's network namespace, privileged, on
	// every node, named after its node, reading the ConfigMap's files.
	ds := r.kubeProxy
	pod := ds.Spec.Template.Spec
	if !pod.HostNetwork || pod.PriorityClassName != "system-node-critical" || pod.ServiceAccountName != r.kubeProxySA.Name {
		t.Errorf("kube-proxy pod hostNetwork %v priority %q account %q", pod.HostNetwork, pod.PriorityClassName, pod.ServiceAccountName)
	}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0].Operator != corev1.TolerationOpExists || pod.Tolerations[0].Key != "" {
		t.Errorf("kube-proxy tolerations %+v, want one that tolerates everything", pod.Tolerations)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("kube-proxy has %d containers", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if ctr.Image != KubeProxyImage || ctr.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("kube-proxy image %q pull %q", ctr.Image, ctr.ImagePullPolicy)
	}
	if ctr.SecurityContext == nil || !ptr.Deref(ctr.SecurityContext.Privileged, false) {
		t.Errorf("kube-proxy is not privileged")
	}
	args := strings.Join(append(append([]string{}, ctr.Command...), ctr.Args...), " ")
	if !strings.Contains(args, "--hostname-override=$(NODE_NAME)") {
		t.Errorf("kube-proxy command %q does not take its name from NODE_NAME", args)
	}
	var nodeName bool
	for _, e := range ctr.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeName = true
		}
	}
	if !nodeName {
		t.Errorf("kube-proxy env %+v has no NODE_NAME from spec.nodeName", ctr.Env)
	}
	mounted := ""
	for _, m := range ctr.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == r.kubeProxyConfig.Name {
				mounted = m.MountPath
			}
		}
	}
	if mounted == "" || !strings.Contains(args, "--config="+mounted+"/config.conf") ||
		cfg.ClientConnection.Kubeconfig != mounted+"/kubeconfig.conf" {
		t.Errorf("kube-proxy mounts its ConfigMap at %q; command %q, kubeconfig %q", mounted, args, cfg.ClientConnection.Kubeconfig)
	}
}

func checkCoreDNS(t *testing.T, r renderedAddons, dnsIP, domain string) {
	t.Helper()
	// RBAC: what the kubernetes plugin lists and watches.
	want := map[string]bool{"/endpoints": false, "/services": false, "/pods": false, "/namespaces": false, "discovery.k8s.io/endpointslices": false}
	for _, rule := range r.coreDNSRole.Rules {
		if !slicesEqual(rule.Verbs, []string{"list", "watch"}) {
			t.Errorf("system:coredns rule %+v grants %v, want list and watch", rule, rule.Verbs)
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				want[g+"/"+res] = true
			}
		}
	}
	for res, granted := range want {
		if !granted {
			t.Errorf("system:coredns does not grant %s", res)
		}
	}
	if r.coreDNSCRB.RoleRef.Name != r.coreDNSRole.Name || len(r.coreDNSCRB.Subjects) != 1 ||
		r.coreDNSCRB.Subjects[0].Name != r.coreDNSSA.Name || r.coreDNSCRB.Subjects[0].Namespace != AddonsNamespace {
		t.Errorf("system:coredns binding = %+v", r.coreDNSCRB)
	}

	// The Corefile serves the cluster domain and the reverse zones, and
	// forwards the rest to the node's resolvers.
	corefile := r.corefile.Data["Corefile"]
	lines := map[string]bool{}
	for _, l := range strings.Split(corefile, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, line := range []string{
		".:53 {",
		"kubernetes " + domain + " in-addr.arpa ip6.arpa {",
		"forward . /etc/resolv.conf {",
		"health {", "ready", "prometheus :9153", "loop", "reload", "cache 30 {",
	} {
		if !lines[line] {
			t.Errorf("the Corefile has no line %q:\n%s", line, corefile)
		}
	}

	// The Deployment.
	dep := r.coreDNS
	pod := dep.Spec.Template.Spec
	if ptr.Deref(dep.Spec.Replicas, 1) != 2 || pod.ServiceAccountName != r.coreDNSSA.Name || pod.DNSPolicy != corev1.DNSDefault {
		t.Errorf("coredns replicas %v account %q dnsPolicy %q", dep.Spec.Replicas, pod.ServiceAccountName, pod.DNSPolicy)
	}
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil ||
		len(pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("coredns has no preferred anti-affinity by host: %+v", pod.Affinity)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("coredns has %d containers", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if ctr.Image != CoreDNSImage {
		t.Errorf("coredns image %q", ctr.Image)
	}
	probe := func(name string, p *corev1.Probe, path string, port int32) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			t.Errorf("coredns %s probe %+v, want GET %s", name, p, path)
			return
		}
		got := p.HTTPGet.Port.IntValue()
		for _, cp := range ctr.Ports {
			if cp.Name == p.HTTPGet.Port.String() {
				got = int(cp.ContainerPort)
			}
		}
		if got != int(port) {
			t.Errorf("coredns %s probe port %s is %d, want %d", name, p.HTTPGet.Port.String(), got, port)
		}
	}
	probe("readiness", ctr.ReadinessProbe, "/ready", 8181)
	probe("liveness", ctr.LivenessProbe, "/health", 8080)
	if !strings.Contains(strings.Join(ctr.Args, " "), "-conf /etc/coredns/Corefile") {
		t.Errorf("coredns args %q do not name the mounted Corefile", ctr.Args)
	}

	// The Service.
	svc := r.kubeDNS
	if svc.Spec.ClusterIP != dnsIP || svc.Spec.Selector["k8s-app"] != dep.Spec.Template.Labels["k8s-app"] {
		t.Errorf("kube-dns clusterIP %q selector %v, want %s selecting the CoreDNS pods", svc.Spec.ClusterIP, svc.Spec.Selector, dnsIP)
	}
	ports := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name+"/"+string(p.Protocol)+"/"+p.TargetPort.String()] = p.Port == p.TargetPort.IntVal
	}
	for _, p := range []string{"dns/UDP/53", "dns-tcp/TCP/53", "metrics/TCP/9153"} {
		if !ports[p] {
			t.Errorf("kube-dns ports %+v have no %s", svc.Spec.Ports, p)
		}
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

func TestRenderAddonsRefuses(t *testing.T) {
	tests := []struct {
		name string
		opts AddonOptions
		want string
	}{
		{name: "no API server", opts: AddonOptions{}, want: "API server URL"},
		{name: "the API server over http", opts: AddonOptions{APIServerURL: "http://10.251.0.1:6443"}, want: "API server URL"},
		{name: "a bad cluster CIDR", opts: AddonOptions{APIServerURL: "https://a:1", ClusterCIDR: "10.244.0.0"}, want: "cluster CIDR"},
		{name: "a bad DNS IP", opts: AddonOptions{APIServerURL: "https://a:1", DNSIP: "kube-dns"}, want: "DNS Service IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RenderAddons(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RenderAddons(%+v) = %v, want an error about the %s", tt.opts, err, tt.want)
			}
		})
	}
}

// TestCoreDNSVersionIsTheModules checks that CoreDNSImage is tagged with
// the version hack/coredns builds.
func TestCoreDNSVersionIsTheModules(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "hack", "coredns", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := "require github.com/coredns/coredns " + CoreDNSVersion + "\n"
	if !strings.Contains(string(data), want) {
		t.Errorf("hack/coredns/go.mod has no line %q:\n%s", strings.TrimSpace(want), data)
	}
}

func TestWorkloadsReady(t *testing.T) {
	ds := func(gen, observed int64, desired, ready, updated int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Generation: gen},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: desired,
				NumberReady: ready, UpdatedNumberScheduled: updated},
		}
	}
	dep := func(gen, observed int64, replicas, ready, updated int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "coredns", Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: observed, ReadyReplicas: ready, UpdatedReplicas: updated},
		}
	}
	tests := []struct {
		name  string
		err   error
		ready bool
	}{
		{"DaemonSet ready on every node", daemonSetReady(ds(1, 1, 3, 3, 3)), true},
		{"DaemonSet not observed", daemonSetReady(ds(2, 1, 3, 3, 3)), false},
		{"DaemonSet with no node", daemonSetReady(ds(1, 1, 0, 0, 0)), false},
		{"DaemonSet with a pod not ready", daemonSetReady(ds(1, 1, 3, 2, 3)), false},
		{"DaemonSet rolling out", daemonSetReady(ds(1, 1, 3, 3, 2)), false},
		{"DaemonSet on its one node", daemonSetReady(ds(1, 1, 1, 1, 1)), true},
		{"Deployment all replicas ready", deploymentReady(dep(1, 1, 2, 2, 2)), true},
		{"Deployment one replica not ready", deploymentReady(dep(1, 1, 2, 1, 2)), false},
		{"Deployment not observed", deploymentReady(dep(3, 2, 2, 2, 2)), false},
		{"Deployment rolling out", deploymentReady(dep(1, 1, 2, 2, 1)), false},
	}
	for _, tt := range tests {
		if (tt.err == nil) != tt.ready {
			t.Errorf("%s: got %v, want ready %v", tt.name, tt.err, tt.ready)
		}
	}
}
