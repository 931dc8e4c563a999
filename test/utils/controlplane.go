package utils

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// controlPlaneStartTimeout bounds the wait for a component's /healthz.
const controlPlaneStartTimeout = 60 * time.Second

// ControllerManagerOptions configure kube-controller-manager.
type ControllerManagerOptions struct {
	// ClusterSigningDuration is the lifetime of the certificates its CSR
	// signers issue (--cluster-signing-duration); 0 keeps the default, a
	// year. The signer backdates NotBefore by 5 minutes, and for a duration
	// under 8 hours NotAfter is issue time + the duration.
	ClusterSigningDuration time.Duration
	// Args are extra flags.
	Args []string
}

// Component is a control-plane process (kube-controller-manager,
// kube-scheduler) run from the envtest binaries against an APIServer. Its
// output goes to LogPath; Stop ends it and removes Dir.
type Component struct {
	Name    string
	Dir     string
	LogPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	stopped bool
}

// StartControllerManager runs kube-controller-manager against api with
// every default controller plus bootstrapsigner and tokencleaner, one
// service account per controller, and its CSR signers on api.ClientCA, the
// CA the API server trusts for client certificates: it approves and signs
// node client certificates as in a real cluster. It returns once its
// /healthz answers.
func StartControllerManager(ctx context.Context, api *APIServer, opts ControllerManagerOptions) (*Component, error) {
	kubeconfig, err := api.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	rootCA, err := api.ServingCAFile()
	if err != nil {
		return nil, err
	}
	server := api.Env.ControlPlane.APIServer
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + filepath.Join(server.CertDir, "sa-signer.key"),
		"--root-ca-file=" + rootCA,
		"--cluster-signing-cert-file=" + api.ClientCA.CertFile,
		"--cluster-signing-key-file=" + api.ClientCA.KeyFile,
		"--v=2",
	}
	if opts.ClusterSigningDuration > 0 {
		args = append(args, "--cluster-signing-duration="+opts.ClusterSigningDuration.String())
	}
	return startComponent(ctx, api, "kube-controller-manager", append(args, opts.Args...))
}

// StartScheduler runs kube-scheduler against api and returns once its
// /healthz answers.
func StartScheduler(ctx context.Context, api *APIServer) (*Component, error) {
	kubeconfig, err := api.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	return startComponent(ctx, api, "kube-scheduler", []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
	})
}

func startComponent(ctx context.Context, api *APIServer, name string, args []string) (*Component, error) {
	bin := filepath.Join(api.Env.BinaryAssetsDirectory, name)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("finding %s (hack/envtest.sh builds it): %w", name, err)
	}
	dir, err := os.MkdirTemp("", "nodelet-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating the %s directory: %w", name, err)
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c := &Component{Name: name, Dir: dir, LogPath: filepath.Join(dir, name+".log")}
	args = append(args,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(dir, "certs"),
	)
	if err := c.start(bin, args); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := c.waitHealthy(ctx, port); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (c *Component) start(bin string, args []string) error {
	logf, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the %s log: %w", c.Name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", c.Name, err)
	}
	c.cmd, c.done = cmd, make(chan struct{})
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	}()
	return nil
}

// waitHealthy polls the component's /healthz, which it serves without
// authentication, over its self-signed certificate.
func (c *Component) waitHealthy(ctx context.Context, port int) error {
	hc := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a local test process's self-signed certificate
	}
	return healthWait{
		name: c.Name, url: fmt.Sprintf("https://127.0.0.1:%d/healthz", port), client: hc,
		exited: c.done, exitErr: c.exitErr, logTail: c.LogTail,
	}.wait(ctx, controlPlaneStartTimeout)
}

func (c *Component) exitErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Running reports whether the process has not exited.
func (c *Component) Running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM, kills the process if it is still there after 20
// seconds, and removes its directory. Safe to call twice.
func (c *Component) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	c.mu.Unlock()
	if c.Running() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("removing the %s directory: %w", c.Name, err)
	}
	return nil
}

// LogTail returns the last lines of the component's log.
func (c *Component) LogTail(lines int) string { return TailLines(c.LogPath, lines) }

// LogLines returns the lines of the component's log that contain substr.
func (c *Component) LogLines(substr string) []string {
	data, err := os.ReadFile(c.LogPath)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// TLS bootstrap: the bootstrap token Secret and the bindings a cluster
// admin creates so that node agents join with a token.
const (
	// BootstrapTokenSecretType is the type of bootstrap token Secrets.
	BootstrapTokenSecretType = corev1.SecretType("bootstrap.kubernetes.io/token")
	// BootstrappersGroup is the group every bootstrap token authenticates in.
	BootstrappersGroup = "system:bootstrappers"
	// NodeBootstrapperRole lets its subjects create and watch CSRs.
	NodeBootstrapperRole = "system:node-bootstrapper"
	// NodeClientApprovalRole lets the controller-manager approve a node
	// client CSR its subject created, for any node name.
	NodeClientApprovalRole = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	// SelfNodeClientApprovalRole lets the controller-manager approve a
	// node's CSR renewing its own client certificate.
	SelfNodeClientApprovalRole = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
	// NodeletNamespace is where config/default installs nodelet and its
	// CSR approver.
	NodeletNamespace = "nodelet-system"
	// CSRApproverServiceAccount is the approver's identity in
	// NodeletNamespace.
	CSRApproverServiceAccount = "nodelet-csr-approver"
)

// BootstrapToken is a bootstrap token Secret's credentials and a
// kubeconfig that authenticates with them.
type BootstrapToken struct {
	ID, Secret string
	// Kubeconfig is the path of a kubeconfig (mode 0600) with the API
	// server's address and CA and the token.
	Kubeconfig string
}

// Token is the bearer token: <id>.<secret>.
func (t *BootstrapToken) Token() string { return t.ID + "." + t.Secret }

// CreateBootstrapToken creates a bootstrap token Secret in kube-system,
// valid for authentication for ttl, with the extra groups groups, and
// writes a kubeconfig that uses it.
func (a *APIServer) CreateBootstrapToken(ctx context.Context, ttl time.Duration, groups ...string) (*BootstrapToken, error) {
	id, err := randomToken(6)
	if err != nil {
		return nil, err
	}
	secret, err := randomToken(16)
	if err != nil {
		return nil, err
	}
	c, err := a.AdminClient()
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       BootstrapTokenSecretType,
		StringData: map[string]string{
			"description":                    "nodelet TLS bootstrap in tests",
			"token-id":                       id,
			"token-secret":                   secret,
			"expiration":                     time.Now().Add(ttl).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
		},
	}
	if len(groups) > 0 {
		s.StringData["auth-extra-groups"] = strings.Join(groups, ",")
	}
	if err := c.Create(ctx, s); err != nil {
		return nil, fmt.Errorf("creating bootstrap token %s: %w", id, err)
	}
	t := &BootstrapToken{ID: id, Secret: secret, Kubeconfig: filepath.Join(a.Dir, "bootstrap-"+id+".kubeconfig")}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: a.Config.Host, CertificateAuthorityData: a.Config.CAData}
	kc.AuthInfos["bootstrap"] = &clientcmdapi.AuthInfo{Token: t.Token()}
	kc.Contexts["bootstrap"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "bootstrap"}
	kc.CurrentContext = "bootstrap"
	if err := clientcmd.WriteToFile(*kc, t.Kubeconfig); err != nil {
		return nil, fmt.Errorf("writing the bootstrap kubeconfig: %w", err)
	}
	if err := os.Chmod(t.Kubeconfig, 0o600); err != nil {
		return nil, fmt.Errorf("writing the bootstrap kubeconfig: %w", err)
	}
	return t, nil
}

// CreateNodeBootstrapToken makes node nodeName's bootstrap token and
// kubeconfig as a cluster admin does, with hack/bootstrap-token.sh, and
// returns them. The token is valid for ttl.
func (a *APIServer) CreateNodeBootstrapToken(ctx context.Context, nodeName string, ttl time.Duration) (*BootstrapToken, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	admin, err := a.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(a.Dir, "bootstrap-"+nodeName+".kubeconfig")
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "bootstrap-token.sh"), nodeName, strconv.Itoa(int(ttl.Seconds()))+"s")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+admin, "KUBECTL="+filepath.Join(a.Env.BinaryAssetsDirectory, "kubectl"),
		"BOOTSTRAP_KUBECONFIG="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("running hack/bootstrap-token.sh %s: %w: %s", nodeName, err, out)
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the bootstrap kubeconfig of %s: %w", nodeName, err)
	}
	auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	id, secret, ok := strings.Cut(auth.Token, ".")
	if !ok {
		return nil, fmt.Errorf("the bootstrap kubeconfig of %s holds no bootstrap token", nodeName)
	}
	return &BootstrapToken{ID: id, Secret: secret, Kubeconfig: path}, nil
}

// KubeadmTLSBootstrapBindings are the ClusterRoleBindings kubeadm makes
// for TLS bootstrap: every bootstrap token may request node client
// certificates, which the controller-manager then approves for any node
// name, and nodes may renew their own. nodelet's install does not use
// them (config/rbac lets only nodelet tokens request, config/approver
// approves); a plain local cluster may.
func KubeadmTLSBootstrapBindings() []*rbacv1.ClusterRoleBinding {
	bind := func(name, group, role string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
		}
	}
	return []*rbacv1.ClusterRoleBinding{
		bind("node-bootstrapper", BootstrappersGroup, NodeBootstrapperRole),
		bind("node-autoapprove-bootstrap", BootstrappersGroup, NodeClientApprovalRole),
		bind("node-autoapprove-certificate-rotation", "system:nodes", SelfNodeClientApprovalRole),
	}
}

// GrantKubeadmTLSBootstrap creates KubeadmTLSBootstrapBindings; those that
// exist are left alone.
func (a *APIServer) GrantKubeadmTLSBootstrap(ctx context.Context) error {
	c, err := a.AdminClient()
	if err != nil {
		return err
	}
	for _, b := range KubeadmTLSBootstrapBindings() {
		if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	return nil
}

// SetUpTLSBootstrap grants kubeadm's TLS bootstrap (the controller-manager
// approves any bootstrap token's node client request) and creates a
// bootstrap token valid for an hour: a local cluster's quick join. The
// e2e of nodelet's own install uses InstallNodeletAccess,
// StartCSRApprover and CreateNodeBootstrapToken instead.
func (a *APIServer) SetUpTLSBootstrap(ctx context.Context) (*BootstrapToken, error) {
	if err := a.GrantKubeadmTLSBootstrap(ctx); err != nil {
		return nil, err
	}
	return a.CreateBootstrapToken(ctx, time.Hour)
}

// accessKinds are the kinds of config/default that InstallNodeletAccess
// creates: identities and RBAC, no workloads.
var accessKinds = []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// InstallNodeletAccess creates what config/default grants (its Namespace,
// ServiceAccounts, roles and bindings, not its DaemonSet or Deployment) as
// `kubectl apply -k config/default` would, and returns the rendered
// objects' kinds and names.
func (a *APIServer) InstallNodeletAccess(ctx context.Context) ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	kubectl := filepath.Join(a.Env.BinaryAssetsDirectory, "kubectl")
	rendered, err := exec.CommandContext(ctx, kubectl, "kustomize", filepath.Join(root, "config", "default")).Output()
	if err != nil {
		return nil, fmt.Errorf("rendering config/default: %w", err)
	}
	var keep []string
	var names []string
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("decoding config/default: %w", err)
		}
		kind, _ := m["kind"].(string)
		if !slices.Contains(accessKinds, kind) {
			continue
		}
		meta, _ := m["metadata"].(map[string]any)
		names = append(names, fmt.Sprintf("%s/%v", kind, meta["name"]))
		keep = append(keep, doc)
	}
	path := filepath.Join(a.Dir, "nodelet-access.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(keep, "\n---\n")), 0o600); err != nil {
		return nil, fmt.Errorf("writing config/default's access objects: %w", err)
	}
	cmd, err := a.Kubectl(ctx, "apply", "--server-side", "--field-manager=nodelet-e2e", "-f", path)
	if err != nil {
		return nil, err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("applying config/default's access objects: %w: %s", err, out)
	}
	return names, nil
}

// CSRApproverOptions configure StartCSRApproverWithOptions.
type CSRApproverOptions struct {
	// ServingCertificates is the servingCertificates section of the
	// approver's configuration file (kind CSRApproverConfiguration), as
	// a YAML or JSON value: the names a node's serving certificate may
	// hold. Empty: no configuration file, and no serving certificate is
	// approved.
	ServingCertificates map[string]any
}

// StartCSRApprover runs `nodelet csr-approver` from the binary built from
// this repository against api, as config/approver's ServiceAccount (with
// a token from the TokenRequest API, so with exactly the RBAC that
// InstallNodeletAccess applied), with leader election in
// NodeletNamespace, and returns once its /healthz answers.
func StartCSRApprover(ctx context.Context, api *APIServer) (*Component, error) {
	return StartCSRApproverWithOptions(ctx, api, CSRApproverOptions{})
}

// StartCSRApproverWithOptions is StartCSRApprover with opts.
func StartCSRApproverWithOptions(ctx context.Context, api *APIServer, opts CSRApproverOptions) (*Component, error) {
	bin, err := NodeletBinary(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(api.Config)
	if err != nil {
		return nil, fmt.Errorf("creating the admin clientset: %w", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(NodeletNamespace).CreateToken(ctx, CSRApproverServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](4 * 3600)}},
		metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token of ServiceAccount %s/%s (InstallNodeletAccess creates it): %w",
			NodeletNamespace, CSRApproverServiceAccount, err)
	}
	dir, err := os.MkdirTemp("", "nodelet-csr-approver-")
	if err != nil {
		return nil, fmt.Errorf("creating the csr-approver directory: %w", err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: api.Config.Host, CertificateAuthorityData: api.Config.CAData}
	kc.AuthInfos["approver"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["approver"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "approver"}
	kc.CurrentContext = "approver"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("writing the csr-approver kubeconfig: %w", err)
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	args := []string{
		"csr-approver",
		"--kubeconfig=" + kubeconfig,
		"--leader-election-namespace=" + NodeletNamespace,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(port),
	}
	if opts.ServingCertificates != nil {
		data, err := yaml.Marshal(map[string]any{
			"apiVersion":          "config.nodelet.io/v1alpha1",
			"kind":                "CSRApproverConfiguration",
			"servingCertificates": opts.ServingCertificates,
		})
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "config.yaml"), data, 0o600)
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("writing the csr-approver configuration: %w", err)
		}
		args = append(args, "--config="+filepath.Join(dir, "config.yaml"))
	}
	c := &Component{Name: "nodelet csr-approver", Dir: dir, LogPath: filepath.Join(dir, "csr-approver.log")}
	if err := c.start(bin, args); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	err = healthWait{
		name: c.Name, url: fmt.Sprintf("http://127.0.0.1:%d/healthz", port),
		exited: c.done, exitErr: c.exitErr, logTail: c.LogTail,
	}.wait(ctx, controlPlaneStartTimeout)
	if err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// randomToken returns n characters of [a-z0-9], the bootstrap token
// alphabet.
func randomToken(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		v, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", fmt.Errorf("choosing a bootstrap token: %w", err)
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b), nil
}
