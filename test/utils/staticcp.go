package utils

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Where kubeadm's manifests find their files inside the containers; the
// manifests mount the control plane's host directories there.
const (
	kubeadmPKIDir     = "/etc/kubernetes/pki"
	kubeadmConfDir    = "/etc/kubernetes"
	kubeadmEtcdData   = "/var/lib/etcd"
	kubeadmSvcCIDR    = "10.96.0.0/12"
	kubeadmSvcIP      = "10.96.0.1"
	controlPlaneTier  = "control-plane"
	nodeCriticalClass = "system-node-critical"
)

// StaticControlPlaneOptions configure NewStaticControlPlane.
type StaticControlPlaneOptions struct {
	// NodeName is the node that runs the control plane (etcd's member
	// name; a SAN of the API server's certificate).
	NodeName string
	// AdvertiseAddress is the node's address: the API server advertises
	// it and its certificate names it. Clients here dial 127.0.0.1.
	AdvertiseAddress net.IP
	// ClusterSigningDuration is the controller-manager's
	// --cluster-signing-duration; 0 keeps its default.
	ClusterSigningDuration time.Duration
}

// StaticControlPlane is a control plane laid out as kubeadm lays it out
// on a control-plane node, under one directory: the PKI (pki/), the
// components' kubeconfigs, etcd's data directory, and the static pod
// manifests of etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler (manifests/), to be run by a node agent whose
// staticPodPath is ManifestDir. Every port is a free one of this machine,
// not kubeadm's fixed ones, so that it can run next to other API servers.
type StaticControlPlane struct {
	Options StaticControlPlaneOptions
	// Dir holds everything below.
	Dir         string
	PKIDir      string
	ManifestDir string
	EtcdDataDir string
	// Server is the API server's address as clients here dial it.
	Server string
	// CAFile is the cluster CA (pki/ca.crt): it signs the API server's
	// certificate and every client certificate, node agents' included;
	// a node agent trusts it for its own API's callers.
	CAFile string
	// AdminKubeconfig (admin.conf) is a cluster administrator's.
	AdminKubeconfig string
	// BootstrapKubeconfig (bootstrap-kubelet.conf) authenticates with
	// Token, whose Secret CreateBootstrapToken creates.
	BootstrapKubeconfig string
	Token               BootstrapToken
	// Ports.
	APIServerPort, EtcdClientPort, EtcdPeerPort, EtcdMetricsPort int
	ControllerManagerPort, SchedulerPort                         int

	ca *certKey
}

// Control-plane component names: their binaries', their images', their
// manifests' (<name>.yaml) and their static pods' (<name>-<node>).
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
)

// ControlPlaneComponents lists the components in start order.
var ControlPlaneComponents = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler}

// NewStaticControlPlane writes the PKI, kubeconfigs and manifests of a
// control plane into dir (which it creates) and returns where they are.
// Nothing runs until a node agent runs ManifestDir.
func NewStaticControlPlane(dir string, opts StaticControlPlaneOptions) (*StaticControlPlane, error) {
	s := &StaticControlPlane{
		Options:     opts,
		Dir:         dir,
		PKIDir:      filepath.Join(dir, "pki"),
		ManifestDir: filepath.Join(dir, "manifests"),
		EtcdDataDir: filepath.Join(dir, "etcd"),
	}
	for _, d := range []string{s.PKIDir, filepath.Join(s.PKIDir, "etcd"), s.ManifestDir, s.EtcdDataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	for _, p := range []*int{&s.APIServerPort, &s.EtcdClientPort, &s.EtcdPeerPort, &s.EtcdMetricsPort, &s.ControllerManagerPort, &s.SchedulerPort} {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		*p = port
	}
	s.Server = "https://127.0.0.1:" + strconv.Itoa(s.APIServerPort)
	s.CAFile = filepath.Join(s.PKIDir, "ca.crt")
	s.AdminKubeconfig = filepath.Join(dir, "admin.conf")
	s.BootstrapKubeconfig = filepath.Join(dir, "bootstrap-kubelet.conf")
	if err := s.writePKI(); err != nil {
		return nil, err
	}
	if err := s.writeKubeconfigs(); err != nil {
		return nil, err
	}
	for _, c := range ControlPlaneComponents {
		if err := s.WriteManifest(s.Pod(c)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// certKey is a certificate and its key.
type certKey struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newKey() (crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	return key, nil
}

// newCertAuthority makes a self-signed CA named cn.
func newCertAuthority(cn string) (*certKey, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("making the %s CA: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("making the %s CA: %w", cn, err)
	}
	return &certKey{cert: cert, key: key}, nil
}

// certSpec is what a signed certificate says.
type certSpec struct {
	cn     string
	orgs   []string
	usages []x509.ExtKeyUsage
	dns    []string
	ips    []net.IP
}

// sign issues a certificate for spec, valid for a year.
func (ca *certKey) sign(spec certSpec) (*certKey, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("choosing a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  spec.usages,
		DNSNames:     spec.dns,
		IPAddresses:  spec.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate for %s: %w", spec.cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate for %s: %w", spec.cn, err)
	}
	return &certKey{cert: cert, key: key}, nil
}

func (ck *certKey) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ck.cert.Raw})
}

func (ck *certKey) keyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ck.key)
	if err != nil {
		return nil, fmt.Errorf("encoding a key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// write writes base.crt and base.key (0600) under dir.
func (ck *certKey) write(dir, base string) error {
	keyPEM, err := ck.keyPEM()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, base+".crt"), ck.certPEM(), 0o600); err != nil {
		return fmt.Errorf("writing %s.crt: %w", base, err)
	}
	if err := os.WriteFile(filepath.Join(dir, base+".key"), keyPEM, 0o600); err != nil {
		return fmt.Errorf("writing %s.key: %w", base, err)
	}
	return nil
}

// writePKI writes kubeadm's pki/ directory: ca, apiserver,
// apiserver-kubelet-client, front-proxy-ca, front-proxy-client, sa.key
// and sa.pub, and etcd/ca, etcd/server, apiserver-etcd-client and
// etcd/healthcheck-client.
func (s *StaticControlPlane) writePKI() error {
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	serverAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	ca, err := newCertAuthority("kubernetes")
	if err != nil {
		return err
	}
	s.ca = ca
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(kubeadmSvcIP)}
	if s.Options.AdvertiseAddress != nil {
		ips = append(ips, s.Options.AdvertiseAddress)
	}
	frontProxyCA, err := newCertAuthority("front-proxy-ca")
	if err != nil {
		return err
	}
	etcdCA, err := newCertAuthority("etcd-ca")
	if err != nil {
		return err
	}
	type issued struct {
		ca   *certKey
		base string
		spec certSpec
	}
	all := []issued{
		{ca, "apiserver", certSpec{cn: "kube-apiserver", usages: serverAuth, ips: ips, dns: []string{
			s.Options.NodeName, "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		}}},
		{ca, "apiserver-kubelet-client", certSpec{cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, usages: clientAuth}},
		{frontProxyCA, "front-proxy-client", certSpec{cn: "front-proxy-client", usages: clientAuth}},
		{etcdCA, "etcd/server", certSpec{cn: s.Options.NodeName, usages: append(serverAuth, x509.ExtKeyUsageClientAuth),
			ips: []net.IP{net.ParseIP("127.0.0.1")}, dns: []string{"localhost", s.Options.NodeName}}},
		{etcdCA, "etcd/healthcheck-client", certSpec{cn: "kube-etcd-healthcheck-client", usages: clientAuth}},
		{etcdCA, "apiserver-etcd-client", certSpec{cn: "kube-apiserver-etcd-client", usages: clientAuth}},
	}
	for _, c := range []struct {
		ck   *certKey
		base string
	}{{ca, "ca"}, {frontProxyCA, "front-proxy-ca"}, {etcdCA, "etcd/ca"}} {
		if err := c.ck.write(s.PKIDir, c.base); err != nil {
			return err
		}
	}
	for _, i := range all {
		ck, err := i.ca.sign(i.spec)
		if err != nil {
			return err
		}
		if err := ck.write(s.PKIDir, i.base); err != nil {
			return err
		}
	}
	sa, err := newKey()
	if err != nil {
		return err
	}
	saKey, err := (&certKey{key: sa}).keyPEM()
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return fmt.Errorf("encoding the service account public key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.PKIDir, "sa.key"), saKey, 0o600); err != nil {
		return fmt.Errorf("writing sa.key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.PKIDir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		return fmt.Errorf("writing sa.pub: %w", err)
	}
	return nil
}

// writeKubeconfigs writes admin.conf, controller-manager.conf,
// scheduler.conf (client certificates of the cluster CA) and
// bootstrap-kubelet.conf (a bootstrap token chosen here).
func (s *StaticControlPlane) writeKubeconfigs() error {
	for _, kc := range []struct {
		file, user string
		orgs       []string
	}{
		{"admin.conf", "kubernetes-admin", []string{"system:masters"}},
		{"controller-manager.conf", "system:kube-controller-manager", nil},
		{"scheduler.conf", "system:kube-scheduler", nil},
	} {
		ck, err := s.ca.sign(certSpec{cn: kc.user, orgs: kc.orgs, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			return err
		}
		keyPEM, err := ck.keyPEM()
		if err != nil {
			return err
		}
		cfg := &rest.Config{Host: s.Server, TLSClientConfig: rest.TLSClientConfig{
			CAData: s.ca.certPEM(), CertData: ck.certPEM(), KeyData: keyPEM,
		}}
		if err := WriteKubeconfig(filepath.Join(s.Dir, kc.file), cfg, kc.user); err != nil {
			return err
		}
	}
	id, err := randomToken(6)
	if err != nil {
		return err
	}
	secret, err := randomToken(16)
	if err != nil {
		return err
	}
	s.Token = BootstrapToken{ID: id, Secret: secret, Kubeconfig: s.BootstrapKubeconfig}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: s.Server, CertificateAuthorityData: s.ca.certPEM()}
	kc.AuthInfos["tls-bootstrap-token-user"] = &clientcmdapi.AuthInfo{Token: s.Token.Token()}
	kc.Contexts["tls-bootstrap-token-user@kubernetes"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "tls-bootstrap-token-user"}
	kc.CurrentContext = "tls-bootstrap-token-user@kubernetes"
	if err := clientcmd.WriteToFile(*kc, s.BootstrapKubeconfig); err != nil {
		return fmt.Errorf("writing the bootstrap kubeconfig: %w", err)
	}
	return os.Chmod(s.BootstrapKubeconfig, 0o600)
}

// ManifestPath is the file of component's manifest.
func (s *StaticControlPlane) ManifestPath(component string) string {
	return filepath.Join(s.ManifestDir, component+".yaml")
}

// WriteManifest writes pod as the manifest of the component it is
// (its "component" label), atomically: a node agent watching the
// directory never reads half a file.
func (s *StaticControlPlane) WriteManifest(pod *corev1.Pod) error {
	component := pod.Labels["component"]
	data, err := yaml.Marshal(pod)
	if err != nil {
		return fmt.Errorf("encoding the %s manifest: %w", component, err)
	}
	// Written beside the directory, not in it: a node agent reads every
	// file of its static pod path, a temporary one too.
	tmp := filepath.Join(s.Dir, "."+component+".yaml")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing the %s manifest: %w", component, err)
	}
	if err := os.Rename(tmp, s.ManifestPath(component)); err != nil {
		return fmt.Errorf("writing the %s manifest: %w", component, err)
	}
	return nil
}

// Pod returns component's static pod as kubeadm writes it, with this
// control plane's ports and paths.
func (s *StaticControlPlane) Pod(component string) *corev1.Pod {
	var (
		command []string
		mounts  []hostMount
		probe   *corev1.HTTPGetAction
		ready   *corev1.HTTPGetAction
		cpu     = "100m"
	)
	pki := hostMount{"k8s-certs", s.PKIDir, kubeadmPKIDir, true, corev1.HostPathDirectoryOrCreate}
	https := func(port int, path string) *corev1.HTTPGetAction {
		return &corev1.HTTPGetAction{Host: "127.0.0.1", Path: path, Port: intstr.FromInt(port), Scheme: corev1.URISchemeHTTPS}
	}
	pkiPath := func(name string) string { return kubeadmPKIDir + "/" + name }
	confPath := func(name string) string { return kubeadmConfDir + "/" + name }
	switch component {
	case Etcd:
		clientURL := "https://127.0.0.1:" + strconv.Itoa(s.EtcdClientPort)
		peerURL := "http://127.0.0.1:" + strconv.Itoa(s.EtcdPeerPort)
		command = []string{
			"etcd",
			"--advertise-client-urls=" + clientURL,
			"--cert-file=" + pkiPath("etcd/server.crt"),
			"--client-cert-auth=true",
			"--data-dir=" + kubeadmEtcdData,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=" + s.Options.NodeName + "=" + peerURL,
			"--key-file=" + pkiPath("etcd/server.key"),
			"--listen-client-urls=" + clientURL,
			"--listen-metrics-urls=http://127.0.0.1:" + strconv.Itoa(s.EtcdMetricsPort),
			"--listen-peer-urls=" + peerURL,
			"--name=" + s.Options.NodeName,
			"--snapshot-count=10000",
			"--trusted-ca-file=" + pkiPath("etcd/ca.crt"),
		}
		mounts = []hostMount{
			{"etcd-certs", filepath.Join(s.PKIDir, "etcd"), kubeadmPKIDir + "/etcd", false, corev1.HostPathDirectoryOrCreate},
			{"etcd-data", s.EtcdDataDir, kubeadmEtcdData, false, corev1.HostPathDirectoryOrCreate},
		}
		health := &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/health?exclude=NOSPACE&serializable=true",
			Port: intstr.FromInt(s.EtcdMetricsPort), Scheme: corev1.URISchemeHTTP}
		probe, ready = health, health
	case KubeAPIServer:
		advertise := "127.0.0.1"
		if s.Options.AdvertiseAddress != nil {
			advertise = s.Options.AdvertiseAddress.String()
		}
		command = []string{
			"kube-apiserver",
			"--advertise-address=" + advertise,
			"--allow-privileged=true",
			"--authorization-mode=Node,RBAC",
			"--client-ca-file=" + pkiPath("ca.crt"),
			"--enable-admission-plugins=NodeRestriction",
			"--enable-bootstrap-token-auth=true",
			"--etcd-cafile=" + pkiPath("etcd/ca.crt"),
			"--etcd-certfile=" + pkiPath("apiserver-etcd-client.crt"),
			"--etcd-keyfile=" + pkiPath("apiserver-etcd-client.key"),
			"--etcd-servers=https://127.0.0.1:" + strconv.Itoa(s.EtcdClientPort),
			"--kubelet-client-certificate=" + pkiPath("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + pkiPath("apiserver-kubelet-client.key"),
			// Node host names do not resolve here.
			"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
			"--proxy-client-cert-file=" + pkiPath("front-proxy-client.crt"),
			"--proxy-client-key-file=" + pkiPath("front-proxy-client.key"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-client-ca-file=" + pkiPath("front-proxy-ca.crt"),
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-username-headers=X-Remote-User",
			"--secure-port=" + strconv.Itoa(s.APIServerPort),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pkiPath("sa.pub"),
			"--service-account-signing-key-file=" + pkiPath("sa.key"),
			"--service-cluster-ip-range=" + kubeadmSvcCIDR,
			"--tls-cert-file=" + pkiPath("apiserver.crt"),
			"--tls-private-key-file=" + pkiPath("apiserver.key"),
		}
		mounts = []hostMount{pki}
		probe, ready = https(s.APIServerPort, "/livez"), https(s.APIServerPort, "/readyz")
		cpu = "250m"
	case KubeControllerManager:
		conf := confPath("controller-manager.conf")
		command = []string{
			"kube-controller-manager",
			"--authentication-kubeconfig=" + conf,
			"--authorization-kubeconfig=" + conf,
			"--bind-address=127.0.0.1",
			"--client-ca-file=" + pkiPath("ca.crt"),
			"--cluster-name=kubernetes",
			"--cluster-signing-cert-file=" + pkiPath("ca.crt"),
			"--cluster-signing-key-file=" + pkiPath("ca.key"),
			"--controllers=*,bootstrapsigner,tokencleaner",
			"--kubeconfig=" + conf,
			// One control plane: nothing to elect, and a lease lost while
			// the API server restarts would end the process.
			"--leader-elect=false",
			"--requestheader-client-ca-file=" + pkiPath("front-proxy-ca.crt"),
			"--root-ca-file=" + pkiPath("ca.crt"),
			"--secure-port=" + strconv.Itoa(s.ControllerManagerPort),
			"--service-account-private-key-file=" + pkiPath("sa.key"),
			"--use-service-account-credentials=true",
		}
		if d := s.Options.ClusterSigningDuration; d > 0 {
			command = append(command, "--cluster-signing-duration="+d.String())
		}
		mounts = []hostMount{pki, {"kubeconfig", filepath.Join(s.Dir, "controller-manager.conf"), conf, true, corev1.HostPathFileOrCreate}}
		probe = https(s.ControllerManagerPort, "/healthz")
		cpu = "200m"
	case KubeScheduler:
		conf := confPath("scheduler.conf")
		command = []string{
			"kube-scheduler",
			"--authentication-kubeconfig=" + conf,
			"--authorization-kubeconfig=" + conf,
			"--bind-address=127.0.0.1",
			"--kubeconfig=" + conf,
			"--leader-elect=false",
			"--secure-port=" + strconv.Itoa(s.SchedulerPort),
		}
		mounts = []hostMount{{"kubeconfig", filepath.Join(s.Dir, "scheduler.conf"), conf, true, corev1.HostPathFileOrCreate}}
		probe = https(s.SchedulerPort, "/healthz")
	}
	c := corev1.Container{
		Name:            component,
		Image:           ControlPlaneImages[component],
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         command,
		Resources:       corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: probe},
			InitialDelaySeconds: 10, PeriodSeconds: 10, TimeoutSeconds: 15, FailureThreshold: 8},
		StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: probe},
			InitialDelaySeconds: 10, PeriodSeconds: 10, TimeoutSeconds: 15, FailureThreshold: 24},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if ready != nil {
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: ready},
			PeriodSeconds: 1, TimeoutSeconds: 15, FailureThreshold: 3}
	}
	if component == Etcd {
		c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("100Mi")
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      component,
			Namespace: metav1.NamespaceSystem,
			Labels:    map[string]string{"component": component, "tier": controlPlaneTier},
		},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: nodeCriticalClass,
			SecurityContext:   &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		},
	}
	for _, m := range mounts {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: m.name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: m.host, Type: ptr.To(m.typ)},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: m.name, MountPath: m.container, ReadOnly: m.readOnly})
	}
	pod.Spec.Containers = []corev1.Container{c}
	return pod
}

type hostMount struct {
	name, host, container string
	readOnly              bool
	typ                   corev1.HostPathType
}

// AdminConfig is the administrator's client configuration.
func (s *StaticControlPlane) AdminConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.AdminKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.AdminKubeconfig, err)
	}
	return cfg, nil
}

// AdminClient is a controller-runtime client as the administrator.
func (s *StaticControlPlane) AdminClient() (client.Client, error) {
	cfg, err := s.AdminConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating the admin client: %w", err)
	}
	return c, nil
}

// Ready reports whether the API server answers /readyz with 200.
func (s *StaticControlPlane) Ready(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AddCert(s.ca.cert)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Server+"/readyz", http.NoBody)
	if err != nil {
		return fmt.Errorf("asking the API server whether it is ready: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("asking the API server whether it is ready: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the API server is not ready: %s", resp.Status)
	}
	return nil
}

// CreateBootstrapToken does what kubeadm's bootstrap-token phase does for
// TLS bootstrap: it creates Token's Secret in kube-system and the
// bindings that let bootstrap tokens request node client certificates,
// which the controller-manager approves (KubeadmTLSBootstrapBindings).
// What exists already is left alone.
func (s *StaticControlPlane) CreateBootstrapToken(ctx context.Context, ttl time.Duration) error {
	c, err := s.AdminClient()
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + s.Token.ID, Namespace: metav1.NamespaceSystem},
		Type:       BootstrapTokenSecretType,
		StringData: map[string]string{
			"description":                    "the node's TLS bootstrap",
			"token-id":                       s.Token.ID,
			"token-secret":                   s.Token.Secret,
			"expiration":                     time.Now().Add(ttl).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"usage-bootstrap-signing":        "true",
			"auth-extra-groups":              "system:bootstrappers:kubeadm:default-node-token",
		},
	}
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating bootstrap token %s: %w", s.Token.ID, err)
	}
	for _, b := range KubeadmTLSBootstrapBindings() {
		if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	return nil
}

// StaticPodName is the name of component's static pod on node.
func StaticPodName(component, node string) string {
	return component + "-" + strings.ToLower(node)
}

// KubeadmKubeletConfig is the kubelet configuration kubeadm 1.37 writes
// to /var/lib/kubelet/config.yaml (kept as test data of the options).
func KubeadmKubeletConfig() ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(root, "internal", "options", "testdata", "kubeadm-1.37-config.yaml"))
}

// StartStaticControlPlaneNodelet starts nodelet as a kubeadm control-plane
// node's kubelet: with kubeadm's config.yaml as it is, and on the command
// line, as a kubeadm-flags.env would carry them, ManifestDir as its static
// pod path, the cluster CA for its own API's callers, and this machine's
// paths and ports. Its only credential is the bootstrap kubeconfig (its
// --kubeconfig does not exist yet). config adds static pod fields.
func (s *StaticControlPlane) StartStaticControlPlaneNodelet(ctx context.Context, ctrd *Containerd, config map[string]any) (*Nodelet, error) {
	kubeadm, err := KubeadmKubeletConfig()
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{
		"staticPodPath": s.ManifestDir,
		"server":        map[string]any{"clientCAFile": s.CAFile},
	}
	for k, v := range config {
		cfg[k] = v
	}
	return StartNodelet(ctx, NodeletOptions{
		NodeName:            s.Options.NodeName,
		Containerd:          ctrd,
		BootstrapKubeconfig: s.BootstrapKubeconfig,
		Config:              cfg,
		KubeletConfig:       kubeadm,
	})
}
