package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/mount-utils"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/keylock"
	"github.com/nodelet/nodelet/internal/nomount"
)

const (
	// secretsInMemory: secret and projected volumes are backed by tmpfs, as
	// the kubelet's are, so secret content never reaches the disk.
	secretsInMemory = true

	// stateDirMode is the mode of the directories nodelet keeps for itself:
	// the pods directory, each pod directory and its bookkeeping subdirectories.
	stateDirMode fs.FileMode = 0o750

	podsDirName       = "pods"
	volumesDirName    = "volumes"
	pluginsDirName    = "plugins"
	containersDirName = "containers"
	etcHostsFileName  = "etc-hosts"

	// Plugin directory names, as the kubelet spells them, so that tools that
	// know the kubelet's layout find volumes where they expect them.
	emptyDirPlugin    = "kubernetes.io~empty-dir"
	configMapPlugin   = "kubernetes.io~configmap"
	secretPlugin      = "kubernetes.io~secret"
	downwardAPIPlugin = "kubernetes.io~downward-api"
	projectedPlugin   = "kubernetes.io~projected"
)

// Fetcher reads the API objects that volumes name. The caller implements it
// with direct GETs: the Node authorizer lets a node read only the objects its
// pods reference, by name. ConfigMap and Secret return an error for which
// k8s.io/apimachinery/pkg/api/errors.IsNotFound is true when the object does
// not exist. Returned objects are not modified.
type Fetcher interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// ServiceAccountToken requests a token bound to pod for its service
	// account (TokenRequest API) and returns it with the expiry the API
	// server gave it, which may be earlier than requested. An empty audience
	// asks for the API server's default audiences.
	ServiceAccountToken(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (authenticationv1.TokenRequestStatus, error)
	// PersistentVolumeClaim reads the named claim of a pod of this node,
	// and PersistentVolume the PV bound to such a claim, each with one GET
	// (the Node authorizer allows no more): a claim that binds later is
	// read again at the next SetUp.
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error)
	// ClusterTrustBundle reads the named bundle, and ClusterTrustBundles
	// lists the bundles of a signer (spec.signerName): the Node authorizer
	// lets nodes read them all.
	ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error)
	ClusterTrustBundles(ctx context.Context, signerName string) ([]certificatesv1.ClusterTrustBundle, error)
	// CreatePodCertificateRequest creates req in its namespace, filling in
	// spec.nodeName's UID and the service account's UID (the Node
	// authorizer and NodeRestriction check both), and returns it with the
	// name the API server generated. PodCertificateRequest reads one by
	// name (a node may not list them beyond its own).
	CreatePodCertificateRequest(ctx context.Context, req *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error)
	PodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error)
}

// SetUpError is a volume that SetUp could not prepare. Its text is the
// message of the kubelet's FailedMount event for the stage that failed.
type SetUpError struct {
	Volume string
	Err    error
	// Stage is where the volume failed; the zero value is the mount.
	Stage SetUpStage
}

// SetUpStage is the step of a volume's set-up that failed, which decides
// the wording of the kubelet's FailedMount message.
type SetUpStage int

const (
	// StageMount is the set-up of the volume itself (MountVolume.SetUp).
	StageMount SetUpStage = iota
	// StageProcess is the resolution of the volume before any mount: its
	// claim or PV could not be read, is not bound, or does not fit how the
	// pod uses it. The kubelet reports it when it gives up waiting for the
	// pod's volumes ("Unable to attach or mount volumes: ...").
	StageProcess
	// StageNodeAffinity is a PV whose nodeAffinity excludes this node.
	StageNodeAffinity
)

func (e *SetUpError) Error() string {
	switch e.Stage {
	case StageProcess:
		return fmt.Sprintf("Unable to attach or mount volumes: unmounted volumes=[%s], unattached volumes=[], failed to process volumes=[%s]: %v",
			e.Volume, e.Volume, e.Err)
	case StageNodeAffinity:
		return fmt.Sprintf("MountVolume.NodeAffinity check failed for volume %q : %v", e.Volume, e.Err)
	default:
		return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
	}
}

func (e *SetUpError) Unwrap() error { return e.Err }

// MissingObject says whether the volume failed because a required ConfigMap
// or Secret it projects does not exist: only that object's creation makes it
// succeed, and until then the volume keeps the files it had.
func (e *SetUpError) MissingObject() bool {
	var m *MissingObjectError
	return errors.As(e.Err, &m)
}

// SetUpErrors returns the *SetUpError values in err, as SetUp, Update and
// Refresh return them (alone, joined, or wrapped), in order.
func SetUpErrors(err error) []*SetUpError {
	var out []*SetUpError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) { //nolint:errorlint // walks the tree itself: errors.As finds only the first
		case nil:
		case *SetUpError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// Manager sets up and tears down pod volumes under one root directory. It is
// safe for concurrent use; calls for the same pod are serialized.
type Manager struct {
	rootDir  string
	hostRoot hostRoot
	fetcher  Fetcher
	mounter  mount.Interface
	// mounts reads the mounter's table for teardowns (mountTable).
	mounts *mountTable
	// removeFirst: a teardown unmounts the pod's volume directories that
	// are mount roots and removes the pod's directory before it reads the
	// mount table, which it reads only when the removal met a mount point.
	// Only with the system's mounter on a kernel that tells mount roots
	// and whose removal sees every mount point (nomount.SeesBindMounts):
	// another mounter's mounts are not the kernel's.
	removeFirst     bool
	clock           clock.PassiveClock
	clusterDomain   string
	nodeHostsFile   string
	nodeAllocatable func() (v1.ResourceList, error)
	nodeLabels      func(context.Context) (map[string]string, error)
	csi             CSI
	locks           keylock.Map
	tokens          *tokenCache
	podCerts        *podCertCache
	// podCertificates is the PodCertificateRequest feature gate.
	podCertificates bool
	// podCertWait is how long a set-up waits for a signer's answer.
	podCertWait time.Duration

	mu sync.Mutex
	// setUp holds the pods whose volumes are all set up.
	setUp map[types.UID]setUpPod
}

// Option configures a Manager.
type Option func(*Manager)

// WithMounter sets the mounter used for tmpfs volumes (default: the host's,
// through system calls; see sysMounter).
func WithMounter(m mount.Interface) Option { return func(v *Manager) { v.mounter = m } }

// WithClock sets the clock used for data directory names and token refresh.
func WithClock(c clock.PassiveClock) Option { return func(v *Manager) { v.clock = c } }

// WithPodCertificates sets whether podCertificate projections are served
// (the PodCertificateRequest feature gate; default true).
func WithPodCertificates(enabled bool) Option {
	return func(v *Manager) { v.podCertificates = enabled }
}

// WithClusterDomain sets the cluster DNS domain used for the pod's FQDN in
// its /etc/hosts when the pod has a subdomain.
func WithClusterDomain(domain string) Option { return func(v *Manager) { v.clusterDomain = domain } }

// WithNodeHostsFile sets the node's hosts file that host-network pods see
// (default /etc/hosts).
func WithNodeHostsFile(path string) Option { return func(v *Manager) { v.nodeHostsFile = path } }

// WithNodeAllocatable sets the source of the node's allocatable resources,
// which a downward API resourceFieldRef reports for a limit the container
// does not set.
func WithNodeAllocatable(f func() (v1.ResourceList, error)) Option {
	return func(v *Manager) { v.nodeAllocatable = f }
}

// WithNodeLabels sets the source of this node's labels, which a local
// PersistentVolume's nodeAffinity must match.
func WithNodeLabels(f func(context.Context) (map[string]string, error)) Option {
	return func(v *Manager) { v.nodeLabels = f }
}

// WithHostRoot sets where nodelet sees the host's root filesystem
// (default "/", nodelet on the host). hostPath volumes (inline and PVs)
// and local PVs are checked, created, resolved and opened under it, their
// links resolved as on the host, while the runtime, which runs on the
// host, is handed the host's own paths. A subPath of such a volume is
// bind-mounted by nodelet from under dir onto the pod directory, which
// must be at the same path for nodelet and the host.
func WithHostRoot(dir string) Option { return func(v *Manager) { v.hostRoot = hostRoot{dir: dir} } }

// WithCSI sets what publishes CSI volumes (a PV's csi source or a pod's
// inline one). Without it a CSI volume fails as the kubelet's does for a
// driver that is not registered.
func WithCSI(c CSI) Option { return func(v *Manager) { v.csi = c } }

// New returns a Manager that keeps pod directories under rootDir/pods,
// creating it with mode 0750.
func New(rootDir string, f Fetcher, opts ...Option) (*Manager, error) {
	if rootDir == "" {
		return nil, errors.New("creating volume manager: root directory is empty")
	}
	if f == nil {
		return nil, errors.New("creating volume manager: fetcher is nil")
	}
	abs, err := filepath.Abs(rootDir)
	if err != nil {
		return nil, fmt.Errorf("creating volume manager: %w", err)
	}
	m := &Manager{
		rootDir:       abs,
		fetcher:       f,
		clock:         clock.RealClock{},
		nodeHostsFile: "/etc/hosts",
		setUp:         map[types.UID]setUpPod{},

		podCertificates: true,
		podCertWait:     certIssueWait,
	}
	for _, o := range opts {
		o(m)
	}
	if m.mounter == nil {
		m.mounter = newSysMounter()
		m.removeFirst = nomount.SeesBindMounts() && statxSeesMountRoots()
	}
	m.mounts = &mountTable{list: m.mounter.List}
	if m.hostRoot, err = newHostRoot(m.hostRoot.dir); err != nil {
		return nil, fmt.Errorf("creating volume manager: %w", err)
	}
	m.tokens = newTokenCache(m.clock)
	m.podCerts = newPodCertCache(m.clock)
	if err := os.MkdirAll(m.podsDir(), stateDirMode); err != nil {
		return nil, fmt.Errorf("creating pods directory: %w", err)
	}
	return m, nil
}

func (m *Manager) podsDir() string { return filepath.Join(m.rootDir, podsDirName) }

// PodDir returns the directory that holds the pod's volumes and files:
// <rootDir>/pods/<uid>. SetUp creates it with mode 0750.
func (m *Manager) PodDir(uid types.UID) string { return filepath.Join(m.podsDir(), string(uid)) }

func (m *Manager) volumeDir(uid types.UID, plugin, name string) string {
	return filepath.Join(m.PodDir(uid), volumesDirName, plugin, name)
}

// pluginMetaDir is where nodelet keeps what it knows about a volume, beside
// the volume and out of the containers' reach.
func (m *Manager) pluginMetaDir(uid types.UID, plugin, name string) string {
	return filepath.Join(m.PodDir(uid), pluginsDirName, plugin, name)
}

// ensurePodDir creates the pod directory and its volumes directory.
func (m *Manager) ensurePodDir(uid types.UID) error {
	if err := mkdirMode(m.PodDir(uid), stateDirMode); err != nil {
		return fmt.Errorf("creating pod directory: %w", err)
	}
	if err := mkdirMode(filepath.Join(m.PodDir(uid), volumesDirName), stateDirMode); err != nil {
		return fmt.Errorf("creating pod volumes directory: %w", err)
	}
	// Each container start makes a directory in it for its termination
	// message file: made here with the others, that is one mkdir a start
	// instead of a failed one, a stat and two more.
	if err := mkdirMode(filepath.Join(m.PodDir(uid), containersDirName), stateDirMode); err != nil {
		return fmt.Errorf("creating pod containers directory: %w", err)
	}
	return nil
}

// SetUp prepares every volume of pod once: it creates emptyDir volumes,
// checks hostPath ones and writes the content of configMap, secret,
// downwardAPI and projected volumes. Once every volume is set up, SetUp
// returns at once without reading anything, until TearDown: a container
// restart needs nothing from the API server. Later content changes are
// written by Update (an object changed) and Refresh (a token is due, the
// pod's labels or annotations changed). Each volume that fails is reported
// as a *SetUpError, the kubelet's FailedMount message naming what is
// missing; the others are still set up, and the next SetUp tries again.
// When several fail, the error joins them (errors.Join).
func (m *Manager) SetUp(ctx context.Context, pod *v1.Pod) error {
	if pod.UID == "" {
		return fmt.Errorf("setting up volumes of pod %s: pod has no UID", klog.KObj(pod))
	}
	defer m.locks.Lock(string(pod.UID))()
	if m.IsSetUp(pod.UID) {
		return nil
	}

	if err := m.ensurePodDir(pod.UID); err != nil {
		return fmt.Errorf("setting up volumes of pod %s: %w", klog.KObj(pod), err)
	}
	var errs []error
	resolved := map[string]PodVolume{}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if !needsResolution(vol) {
			if err := m.setUpVolume(ctx, pod, vol); err != nil {
				errs = append(errs, &SetUpError{Volume: vol.Name, Err: err})
			}
			continue
		}
		vp, err := m.setUpResolved(ctx, pod, vol)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resolved[vol.Name] = vp
	}
	if len(errs) == 0 {
		m.markSetUp(pod, resolved)
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

func (m *Manager) setUpVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) error {
	src := &vol.VolumeSource
	switch {
	case src.EmptyDir != nil:
		return m.setUpEmptyDir(pod, vol.Name, src.EmptyDir)
	case src.HostPath != nil:
		return checkHostPath(m.hostRoot, src.HostPath)
	case src.Image != nil:
		// Nothing on the host: the runtime mounts the image, which the
		// executor pulls before each container that mounts it starts.
		return nil
	case src.ConfigMap != nil:
		return m.setUpContent(ctx, pod, vol.Name, configMapPlugin, false, func() (payload, error) {
			return m.configMapVolumePayload(ctx, pod, src.ConfigMap)
		})
	case src.Secret != nil:
		return m.setUpContent(ctx, pod, vol.Name, secretPlugin, secretsInMemory, func() (payload, error) {
			return m.secretVolumePayload(ctx, pod, src.Secret)
		})
	case src.DownwardAPI != nil:
		return m.setUpContent(ctx, pod, vol.Name, downwardAPIPlugin, false, func() (payload, error) {
			return m.downwardAPIPayload(pod, src.DownwardAPI.Items, modeOrDefault(src.DownwardAPI.DefaultMode))
		})
	case src.Projected != nil:
		return m.setUpContent(ctx, pod, vol.Name, projectedPlugin, secretsInMemory, func() (payload, error) {
			return m.projectedPayload(ctx, pod, src.Projected)
		})
	default:
		return fmt.Errorf("volume source %s is not supported by nodelet", sourceKind(src))
	}
}

// setUpContent creates the directory of a volume whose content nodelet writes,
// on tmpfs if inMemory, builds its payload and writes it atomically.
func (m *Manager) setUpContent(ctx context.Context, pod *v1.Pod, name, plugin string, inMemory bool, build func() (payload, error)) error {
	dir := m.volumeDir(pod.UID, plugin, name)
	if err := mkdirMode(dir, dataDirMode); err != nil {
		return fmt.Errorf("creating volume directory: %w", err)
	}
	if inMemory {
		if err := m.ensureTmpfs(dir, nil); err != nil {
			return err
		}
		if err := os.Chmod(dir, dataDirMode); err != nil {
			return fmt.Errorf("setting mode of volume directory: %w", err)
		}
	}
	p, err := build()
	if err != nil {
		return err
	}
	w := atomicWriter{dir: dir, gid: fsGroup(pod), now: m.clock.Now}
	changed, err := w.write(p)
	if err != nil {
		return fmt.Errorf("writing volume content: %w", err)
	}
	if changed {
		log.FromContext(ctx).V(1).Info("Wrote volume content", "pod", klog.KObj(pod), "volume", name)
	}
	return nil
}

// fsGroup returns the pod's fsGroup, or nil.
func fsGroup(pod *v1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}

// sourceKind names a volume source nodelet does not implement, for errors.
func sourceKind(src *v1.VolumeSource) string {
	switch {
	case src.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case src.Ephemeral != nil:
		return "ephemeral"
	case src.CSI != nil:
		return "csi"
	case src.Image != nil:
		return "image"
	case src.NFS != nil:
		return "nfs"
	case src.ISCSI != nil:
		return "iscsi"
	default:
		return "of this type"
	}
}

// ListPodDirs returns the UIDs of the pods that have a directory, so the
// caller can tear down those it no longer knows.
func (m *Manager) ListPodDirs() ([]types.UID, error) {
	entries, err := os.ReadDir(m.podsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing pod directories: %w", err)
	}
	var uids []types.UID
	for _, e := range entries {
		if e.IsDir() {
			uids = append(uids, types.UID(e.Name()))
		}
	}
	return uids, nil
}

// mkdirMode creates dir and its missing parents and gives dir exactly mode,
// whatever the umask. A new directory whose mode the umask leaves as it is
// costs one system call: a pod's directories are made in every pod start.
func mkdirMode(dir string, mode fs.FileMode) error {
	created, err := makeDir(dir, mode)
	if err != nil {
		return err
	}
	if created && umaskKeeps(mode) {
		return nil
	}
	return os.Chmod(dir, mode)
}
