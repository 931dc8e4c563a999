package utils

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// envtestBinaries are what hack/envtest.sh builds and envtest runs.
var envtestBinaries = []string{"kube-apiserver", "etcd", "kubectl"}

// APIServer is an envtest control plane (etcd and kube-apiserver) configured
// the way a real cluster is for a node agent: authorization-mode Node,RBAC
// and the NodeRestriction admission plugin.
type APIServer struct {
	// Env is the envtest environment; Env.Config is the admin's rest.Config
	// (system:masters).
	Env *envtest.Environment
	// Config is the admin's rest.Config, the same as Env.Config.
	Config *rest.Config
	// ClientCA is the CA the API server trusts for client certificates
	// (--client-ca-file): it signs the users NodeUserConfig and AddUser
	// make, and its key is on disk (ClientCA.KeyFile) so that a
	// controller-manager signs node certificates with it.
	ClientCA *CA
	// KubeletClientCA signs the client certificate the API server presents
	// to node agents (--kubelet-client-certificate: user
	// kube-apiserver-kubelet-client in system:masters); node agents trust
	// it as their clientCAFile. Tests sign their own callers with it.
	KubeletClientCA *CA
	// Dir holds the CA, the API server's kubelet client pair and the
	// admin kubeconfig; removed by Stop.
	Dir string

	mu      sync.Mutex
	stopped bool
	// keptCertDirs are the certificate directories Restart made.
	keptCertDirs []string
}

// APIServerOptions change the API server's configuration; the zero value
// is what StartAPIServer runs.
type APIServerOptions struct {
	// BootstrapTokenAuth authenticates bootstrap tokens (Secrets of type
	// bootstrap.kubernetes.io/token in kube-system) as
	// system:bootstrap:<id> in system:bootstrappers, for TLS bootstrap.
	BootstrapTokenAuth bool
	// ServiceAccountAdmission turns on the ServiceAccount admission plugin,
	// which envtest turns off: pods get their service account and its token
	// volume, and are refused while the account does not exist (a
	// controller-manager creates each namespace's default one).
	ServiceAccountAdmission bool
	// Args are more kube-apiserver flags, name (without dashes) to value.
	Args map[string]string
	// BindAddress, when set, is the address the API server serves on and
	// advertises instead of 127.0.0.1: the host's address on a node
	// network, which the nodes' namespaces reach. Its serving certificate
	// (made here, not by envtest; Config trusts its CA) then also names
	// 127.0.0.1, the kubernetes Service's IP (KubernetesServiceIP),
	// localhost and the Service's DNS names, so that pods reach it
	// through the Service too.
	BindAddress net.IP
}

// StartAPIServer starts etcd and kube-apiserver. It makes sure the binaries
// exist first: KUBEBUILDER_ASSETS is used when it names a directory holding
// them, otherwise hack/envtest.sh builds them (a no-op when cached) and
// KUBEBUILDER_ASSETS is set to its output for the rest of the process.
func StartAPIServer(ctx context.Context) (*APIServer, error) {
	return StartAPIServerWithOptions(ctx, APIServerOptions{})
}

// StartAPIServerWithOptions is StartAPIServer with opts.
func StartAPIServerWithOptions(ctx context.Context, opts APIServerOptions) (*APIServer, error) {
	assets, err := EnvtestAssets(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodelet-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("creating the API server directory: %w", err)
	}
	ca, err := NewCA(dir, "kubelet-client")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	clientCA, err := NewCA(dir, "client")
	if err == nil {
		err = clientCA.WriteKey()
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	certPEM, keyPEM, err := ca.ClientCert(KubeletClientUser, "system:masters")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	certFile, keyFile := filepath.Join(dir, "kubelet-client.crt"), filepath.Join(dir, "kubelet-client.key")
	if err := errors.Join(os.WriteFile(certFile, certPEM, 0o600), os.WriteFile(keyFile, keyPEM, 0o600)); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("writing the API server's kubelet client certificate: %w", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 60 * time.Second,
		// The API server drains its requests and watches before it
		// exits; on a loaded machine that took over 20 s.
		ControlPlaneStopTimeout: 60 * time.Second,
	}
	// envtest's own client certificate CA keeps its key in memory; this one
	// is on disk, for the controller-manager's CSR signer.
	env.ControlPlane.GetAPIServer().SecureServing.Authn = &caAuthn{ca: clientCA}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("authorization-mode", "Node,RBAC")
	args.Set("enable-admission-plugins", "NodeRestriction")
	// kubectl logs/exec/port-forward go through the API server to the
	// node agent's API, as in a real cluster: the API server presents this
	// client certificate and dials the Node's InternalIP (host names of
	// test nodes resolve nowhere).
	args.Set("kubelet-client-certificate", certFile)
	args.Set("kubelet-client-key", keyFile)
	args.Set("kubelet-preferred-address-types", "InternalIP,Hostname")
	if opts.BootstrapTokenAuth {
		args.Set("enable-bootstrap-token-auth", "true")
	}
	if opts.ServiceAccountAdmission {
		args.Disable("disable-admission-plugins")
	}
	for name, value := range opts.Args {
		args.Set(name, value)
	}
	var certDirs []string
	if opts.BindAddress != nil {
		certDir, err := serveOn(env, opts.BindAddress)
		if certDir != "" {
			certDirs = append(certDirs, certDir)
		}
		if err != nil {
			_ = os.RemoveAll(certDir)
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		// A half-started control plane still has processes to stop.
		_ = env.Stop()
		_ = os.RemoveAll(dir)
		for _, d := range certDirs {
			_ = os.RemoveAll(d)
		}
		return nil, fmt.Errorf("starting the envtest API server: %w", err)
	}
	return &APIServer{Env: env, Config: cfg, ClientCA: clientCA, KubeletClientCA: ca, Dir: dir, keptCertDirs: certDirs}, nil
}

// serveOn makes env's API server serve on and advertise ip, with a
// certificate directory of its own that envtest uses as it is (and does
// not remove: it is returned, for Stop).
func serveOn(env *envtest.Environment, ip net.IP) (string, error) {
	certDir, err := os.MkdirTemp("", "nodelet-apiserver-certs-")
	if err != nil {
		return "", fmt.Errorf("creating the API server's certificate directory: %w", err)
	}
	caPEM, err := writeAPIServerCerts(certDir, []net.IP{ip})
	if err != nil {
		return certDir, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return certDir, fmt.Errorf("finding a free port on %s: %w", ip, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	server := env.ControlPlane.GetAPIServer()
	server.CertDir = certDir
	server.SecureServing.Address = ip.String()
	server.SecureServing.Port = strconv.Itoa(port)
	server.SecureServing.CA = caPEM
	server.Configure().Set("advertise-address", ip.String())
	return certDir, nil
}

// caAuthn is an envtest Authn that authenticates users by client
// certificates signed by ca.
type caAuthn struct {
	ca *CA
}

var _ envtest.Authn = (*caAuthn)(nil)

// Configure points the API server at the CA certificate.
func (c *caAuthn) Configure(_ string, args *envtest.Arguments) error {
	args.Set("client-ca-file", c.ca.CertFile)
	return nil
}

// Start does nothing: the CA certificate was written when it was made.
func (c *caAuthn) Start() error { return nil }

// Stop does nothing: the CA lives in the APIServer's directory.
func (c *caAuthn) Stop() error { return nil }

// AddUser returns a copy of base with a client certificate for user.
func (c *caAuthn) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	certPEM, keyPEM, err := c.ca.ClientCert(user.Name, user.Groups...)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = certPEM, keyPEM
	return cfg, nil
}

// ServingCAFile writes (once) and returns the CA of the API server's
// serving certificate, which clients in other processes verify it with.
func (a *APIServer) ServingCAFile() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	path := filepath.Join(a.Dir, "serving-ca.crt")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.WriteFile(path, a.Config.CAData, 0o600); err != nil {
		return "", fmt.Errorf("writing the API server's serving CA: %w", err)
	}
	return path, nil
}

// KubeletClientUser is the user the API server authenticates as to node
// agents.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// AdminKubeconfig writes (once) and returns a kubeconfig file with the
// admin's credentials, for kubectl.
func (a *APIServer) AdminKubeconfig() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	path := filepath.Join(a.Dir, "admin.kubeconfig")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := WriteKubeconfig(path, a.Config, "admin"); err != nil {
		return "", err
	}
	return path, nil
}

// Kubectl returns a command running the envtest-built kubectl with the
// admin kubeconfig and args.
func (a *APIServer) Kubectl(ctx context.Context, args ...string) (*exec.Cmd, error) {
	kubeconfig, err := a.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(a.Env.BinaryAssetsDirectory, "kubectl")
	return exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...), nil
}

// NodeUserConfig returns a rest.Config that authenticates as the kubelet of
// nodeName would: user system:node:<nodeName> in group system:nodes, subject
// to the Node authorizer and NodeRestriction.
func (a *APIServer) NodeUserConfig(nodeName string) (*rest.Config, error) {
	user, err := a.Env.ControlPlane.AddUser(envtest.User{
		Name:   "system:node:" + nodeName,
		Groups: []string{"system:nodes"},
	}, &rest.Config{QPS: 100, Burst: 200})
	if err != nil {
		return nil, fmt.Errorf("provisioning the node user of %s: %w", nodeName, err)
	}
	return user.Config(), nil
}

// AdminClient returns a controller-runtime client with the admin's
// credentials and the client-go scheme.
func (a *APIServer) AdminClient() (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the client scheme: %w", err)
	}
	c, err := client.New(a.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the admin client: %w", err)
	}
	return c, nil
}

// Stop stops kube-apiserver and etcd and removes their directories. Safe
// to call twice.
func (a *APIServer) Stop() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return nil
	}
	a.stopped = true
	err := a.Env.Stop()
	for _, dir := range a.keptCertDirs {
		err = errors.Join(err, os.RemoveAll(dir))
	}
	if err != nil {
		return fmt.Errorf("stopping the envtest API server: %w", err)
	}
	if err := os.RemoveAll(a.Dir); err != nil {
		return fmt.Errorf("removing the API server directory: %w", err)
	}
	return nil
}

// Restart stops kube-apiserver (etcd keeps running), calls during, and
// starts it again on the same port with the same serving certificate, so
// that running clients reconnect.
//
// envtest can restart an API server, keeping its port and client CA, but
// when it made the certificate directory itself it deletes it on Stop and
// makes a new serving CA on Start, which clients built before do not trust.
// So the directory is copied aside first and the restart uses the copy.
func (a *APIServer) Restart(during func()) error {
	server := a.Env.ControlPlane.APIServer
	port := server.SecureServing.Port
	keep, err := os.MkdirTemp("", "nodelet-apiserver-certs-")
	if err != nil {
		return fmt.Errorf("restarting the API server: %w", err)
	}
	a.mu.Lock()
	a.keptCertDirs = append(a.keptCertDirs, keep)
	a.mu.Unlock()
	if err := copyFiles(server.CertDir, keep); err != nil {
		return fmt.Errorf("restarting the API server: %w", err)
	}
	if err := server.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process kube-apiserver to stop") {
		// envtest sends SIGKILL when SIGTERM did not stop it in time; the
		// API server is down either way, abruptly like a crashed one.
		return fmt.Errorf("stopping the API server: %w", err)
	}
	server.CertDir = keep
	during()
	if err := server.Start(); err != nil {
		return fmt.Errorf("starting the API server again: %w", err)
	}
	if server.SecureServing.Port != port {
		return fmt.Errorf("the restarted API server listens on port %s, not %s as its clients expect", server.SecureServing.Port, port)
	}
	return nil
}

// copyFiles copies the regular files of dir src into dst.
func copyFiles(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return fmt.Errorf("reading %s: %w", e.Name(), err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", e.Name(), err)
		}
	}
	return nil
}

// EnvtestAssets returns the directory holding kube-apiserver, etcd and
// kubectl, building them with hack/envtest.sh when KUBEBUILDER_ASSETS does
// not name such a directory, and sets KUBEBUILDER_ASSETS to it.
func EnvtestAssets(ctx context.Context) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" && HasExecutables(dir, envtestBinaries...) {
		return dir, nil
	}
	// Test packages run in parallel, and two builds into the same cache
	// would clobber each other: one at a time, on this machine.
	cache, err := CacheDir("")
	if err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, "envtest.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", fmt.Errorf("opening envtest build lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking envtest build: %w", err)
	}
	// The script may also be running outside of any test (make envtest);
	// wait for that run instead of starting a second build beside it.
	if err := waitForOtherEnvtestBuilds(ctx); err != nil {
		return "", err
	}
	out, err := runHackScript(ctx, "envtest.sh")
	if err != nil {
		return "", fmt.Errorf("building envtest binaries: %w", err)
	}
	dir, err := BinDirOf(out, envtestBinaries...)
	if err != nil {
		return "", fmt.Errorf("building envtest binaries: %w", err)
	}
	if err := os.Setenv("KUBEBUILDER_ASSETS", dir); err != nil {
		return "", fmt.Errorf("setting KUBEBUILDER_ASSETS: %w", err)
	}
	return dir, nil
}

// waitForOtherEnvtestBuilds waits while another process runs hack/envtest.sh.
func waitForOtherEnvtestBuilds(ctx context.Context) error {
	for {
		procs, err := listProcs()
		if err != nil {
			return err
		}
		busy := false
		for _, p := range procs {
			for _, a := range p.args {
				if strings.HasSuffix(a, "hack/envtest.sh") || a == "envtest.sh" {
					busy = true
				}
			}
		}
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for another hack/envtest.sh to finish: %w", ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}
