package utils

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/manifests/addons"
)

// The cluster's addressing plan, which AddonOptions defaults to.
const (
	// DefaultClusterCIDR is the pod network: one /24 per node out of it.
	DefaultClusterCIDR = "10.244.0.0/16"
	// DefaultDNSIP is the kube-dns Service's ClusterIP, in envtest's
	// Service CIDR 10.0.0.0/24.
	DefaultDNSIP = "10.0.0.10"
	// DefaultClusterDomain is the cluster's DNS domain.
	DefaultClusterDomain = "cluster.local"
)

// AddonsNamespace is where the add-ons run.
const AddonsNamespace = "kube-system"

// The add-ons' workloads, as the manifests name them.
const (
	KubeProxyDaemonSet = "kube-proxy"
	CoreDNSDeployment  = "coredns"
	KubeDNSService     = "kube-dns"
)

// addonsFieldManager owns the fields InstallAddons applies.
const addonsFieldManager = "nodelet-addons"

// AddonOptions are the cluster's facts the add-on manifests carry.
type AddonOptions struct {
	// APIServerURL is the API server's real address as the nodes reach it
	// (https://<host bridge address>:<port>), for kube-proxy's kubeconfig:
	// not the kubernetes Service, which kube-proxy itself programs.
	// Required.
	APIServerURL string
	// CAData is the PEM of the CA that signed the API server's serving
	// certificate. When set, kube-proxy's kubeconfig carries it inline;
	// when empty, it names the ca.crt of the ServiceAccount's projected
	// volume (the kube-root-ca.crt ConfigMap).
	CAData []byte
	// ClusterCIDR is the pod network; DefaultClusterCIDR when empty.
	ClusterCIDR string
	// DNSIP is the kube-dns Service's ClusterIP; DefaultDNSIP when empty.
	DNSIP string
	// ClusterDomain is the domain CoreDNS serves; DefaultClusterDomain
	// when empty.
	ClusterDomain string
	// KubeProxyImage and CoreDNSImage name the images; the ones
	// AddonImages builds when empty.
	KubeProxyImage string
	CoreDNSImage   string
}

// withDefaults returns o with its empty fields defaulted, or an error for
// a value the manifests cannot carry.
func (o AddonOptions) withDefaults() (AddonOptions, error) {
	if o.ClusterCIDR == "" {
		o.ClusterCIDR = DefaultClusterCIDR
	}
	if o.DNSIP == "" {
		o.DNSIP = DefaultDNSIP
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = DefaultClusterDomain
	}
	if o.KubeProxyImage == "" {
		o.KubeProxyImage = KubeProxyImage
	}
	if o.CoreDNSImage == "" {
		o.CoreDNSImage = CoreDNSImage
	}
	u, err := url.Parse(o.APIServerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return o, fmt.Errorf("the API server URL %q is not an https:// URL with a host", o.APIServerURL)
	}
	if _, _, err := net.ParseCIDR(o.ClusterCIDR); err != nil {
		return o, fmt.Errorf("the cluster CIDR %q: %w", o.ClusterCIDR, err)
	}
	if net.ParseIP(o.DNSIP) == nil {
		return o, fmt.Errorf("the DNS Service IP %q is not an IP address", o.DNSIP)
	}
	return o, nil
}

// addonValues are what the manifest templates refer to.
type addonValues struct {
	APIServerURL   string
	CAData         string
	ClusterCIDR    string
	DNSIP          string
	ClusterDomain  string
	KubeProxyImage string
	CoreDNSImage   string
}

// RenderAddons returns the objects of the add-on manifests
// (test/manifests/addons) for opts, in the order they are applied.
func RenderAddons(opts AddonOptions) ([]*unstructured.Unstructured, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("rendering the add-ons: %w", err)
	}
	values := addonValues{
		APIServerURL:   o.APIServerURL,
		ClusterCIDR:    o.ClusterCIDR,
		DNSIP:          o.DNSIP,
		ClusterDomain:  o.ClusterDomain,
		KubeProxyImage: o.KubeProxyImage,
		CoreDNSImage:   o.CoreDNSImage,
	}
	if len(o.CAData) > 0 {
		values.CAData = base64.StdEncoding.EncodeToString(o.CAData)
	}
	var objs []*unstructured.Unstructured
	for _, file := range addons.Order {
		text, err := addons.Files.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the add-on manifest %s: %w", file, err)
		}
		tmpl, err := template.New(file).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("parsing the add-on manifest %s: %w", file, err)
		}
		var out bytes.Buffer
		if err := tmpl.Execute(&out, values); err != nil {
			return nil, fmt.Errorf("rendering the add-on manifest %s: %w", file, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(&out, 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decoding the add-on manifest %s: %w", file, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs, nil
}

// InstallAddons applies the add-on manifests for opts with server-side
// apply (field manager nodelet-addons, taking over conflicting fields), so
// a second call updates what the first created. The images must be in the
// nodes' containerd already (AddonImages, then an import on every node).
func InstallAddons(ctx context.Context, c client.Client, opts AddonOptions) error {
	objs, err := RenderAddons(opts)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(addonsFieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	return nil
}

// addonsPollInterval is how often WaitAddonsReady looks again.
const addonsPollInterval = time.Second

// WaitAddonsReady waits until kube-proxy runs and is ready on every node
// its DaemonSet schedules to (at least one) and every CoreDNS replica is
// ready (its /ready: the kubernetes plugin has synced with the API
// server), or ctx ends; the error then says what was still missing.
func WaitAddonsReady(ctx context.Context, c client.Client) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, addonsPollInterval, true, func(ctx context.Context) (bool, error) {
		last = addonsReady(ctx, c)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the add-ons: %w (last: %w)", err, last)
	}
	return nil
}

// addonsReady returns nil when the add-ons are ready, else what is not.
func addonsReady(ctx context.Context, c client.Client) error {
	ds := &appsv1.DaemonSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: AddonsNamespace, Name: KubeProxyDaemonSet}, ds); err != nil {
		return fmt.Errorf("getting the kube-proxy DaemonSet: %w", err)
	}
	if err := daemonSetReady(ds); err != nil {
		return err
	}
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: AddonsNamespace, Name: CoreDNSDeployment}, dep); err != nil {
		return fmt.Errorf("getting the CoreDNS Deployment: %w", err)
	}
	return deploymentReady(dep)
}

// daemonSetReady returns nil when the controller has seen ds's latest
// spec and a ready, up-to-date pod runs on every node it schedules to.
func daemonSetReady(ds *appsv1.DaemonSet) error {
	s := ds.Status
	switch {
	case s.ObservedGeneration < ds.Generation:
		return fmt.Errorf("the DaemonSet %s: generation %d not observed yet", ds.Name, ds.Generation)
	case s.DesiredNumberScheduled == 0:
		return fmt.Errorf("the DaemonSet %s: no node to run on yet", ds.Name)
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled || s.NumberReady < s.DesiredNumberScheduled:
		return fmt.Errorf("the DaemonSet %s: %d of %d pods ready, %d up to date",
			ds.Name, s.NumberReady, s.DesiredNumberScheduled, s.UpdatedNumberScheduled)
	}
	return nil
}

// deploymentReady returns nil when the controller has seen dep's latest
// spec and all its replicas are up to date and ready.
func deploymentReady(dep *appsv1.Deployment) error {
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	s := dep.Status
	switch {
	case s.ObservedGeneration < dep.Generation:
		return fmt.Errorf("the Deployment %s: generation %d not observed yet", dep.Name, dep.Generation)
	case s.UpdatedReplicas < want || s.ReadyReplicas < want:
		return fmt.Errorf("the Deployment %s: %d of %d replicas ready, %d up to date",
			dep.Name, s.ReadyReplicas, want, s.UpdatedReplicas)
	}
	return nil
}
