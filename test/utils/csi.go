package utils

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/test/csi/hostpath"
	"github.com/nodelet/nodelet/test/csi/registrar"
)

// csiStartTimeout bounds the wait for each process of the CSI stack.
const csiStartTimeout = 60 * time.Second

// CallRecord is one CSI call the test driver served (its call log's line).
type CallRecord = hostpath.CallRecord

// CSIStackOptions configure StartCSIStack.
type CSIStackOptions struct {
	// DriverName is the CSI driver's name; hostpath.DefaultDriverName
	// (hostpath.csi.nodelet.test) when empty.
	DriverName string
	// NodeID is the driver's node id (--nodeid), also the value of its
	// topology key; "csi-node" when empty. Give the node's name.
	NodeID string
	// RegistrationDir is where the registrar serves
	// <driver>-reg.sock: a node agent's <rootDir>/plugins_registry.
	// A directory in the stack's own when empty.
	RegistrationDir string
	// PluginDir holds the driver's socket, csi.sock; the node agent dials
	// it at that path (the registrar's --kubelet-registration-path). A
	// directory in the stack's own when empty; a node agent's
	// <rootDir>/plugins/<driver> mirrors a real node.
	PluginDir string
	// AttachRequired makes the driver serve ControllerPublish, sets
	// attachRequired on the CSIDriver and starts external-attacher.
	AttachRequired bool
	// MaxVolumesPerNode is the driver's --max-volumes-per-node.
	MaxVolumesPerNode int64
	// StorageClass is the name of the StorageClass to create;
	// "csi-hostpath" when empty.
	StorageClass string
	// TokenRequests go on the CSIDriver's spec.tokenRequests.
	TokenRequests []storagev1.TokenRequest
	// RequiresRepublish goes on the CSIDriver's spec.requiresRepublish.
	RequiresRepublish bool
	// NoTopology runs external-provisioner without its Topology feature:
	// PVs without node affinity, for a spec whose node agent does not
	// label its Node with the driver's topology key or list the key in
	// its CSINode (with Topology on, provisioning waits for both).
	NoTopology bool
	// ProvisionerArgs and AttacherArgs are extra flags of the sidecars.
	ProvisionerArgs []string
	AttacherArgs    []string
}

// CSIStack is the test CSI driver (test/csi/cmd/csi-hostpath), its
// registrar (test/csi/cmd/csi-registrar), external-provisioner and
// optionally external-attacher, run as host processes against an API
// server, with the CSIDriver and StorageClass objects for them.
type CSIStack struct {
	Options CSIStackOptions
	// Dir holds the state directory, the call log and the processes' logs.
	Dir string
	// StateDir holds a directory per volume (StateDir/<volume id>).
	StateDir string
	// Endpoint is the driver's socket.
	Endpoint string
	// RegistrationSocket is the registrar's socket.
	RegistrationSocket string
	// CallLogPath is the driver's call log.
	CallLogPath string

	admin client.Client
	procs []*Component

	mu      sync.Mutex
	stopped bool
}

var (
	csiBuildOnce sync.Once
	csiBuildDir  string
	csiBuildErr  error
)

// CSITestBinaries builds bin/csi-hostpath-e2e and bin/csi-registrar-e2e
// from the repository once per process and returns the bin directory.
func CSITestBinaries(ctx context.Context) (string, error) {
	csiBuildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			csiBuildErr = err
			return
		}
		csiBuildDir = filepath.Join(root, "bin")
		for _, b := range []string{"csi-hostpath", "csi-registrar"} {
			out := filepath.Join(csiBuildDir, b+"-e2e")
			if err := BuildGoBinary(ctx, root, "./test/csi/cmd/"+b, out); err != nil {
				csiBuildErr = err
				return
			}
		}
	})
	return csiBuildDir, csiBuildErr
}

var (
	sidecarsOnce sync.Once
	sidecarsDone = make(chan struct{})
	sidecarsDir  string
	sidecarsErr  error
)

// PrefetchCSISidecars starts building csi-provisioner and csi-attacher in
// the background (hack/csi.sh, a no-op once they are in the cache), so that
// a suite whose specs mostly wait on containers and controllers builds them
// meanwhile instead of when its first CSI spec starts. The build stops
// with ctx. CSISidecars waits for it.
func PrefetchCSISidecars(ctx context.Context) {
	sidecarsOnce.Do(func() {
		go func() {
			defer close(sidecarsDone)
			out, err := RunHackScript(ctx, nil, "csi.sh")
			if err != nil {
				sidecarsErr = err
				return
			}
			sidecarsDir, sidecarsErr = BinDirOf(out, "csi-provisioner", "csi-attacher")
		}()
	})
}

// PrefetchBuilds starts, in the background and one after the other, the
// builds a suite's later specs wait for when the cache is cold: the CSI
// sidecars (PrefetchCSISidecars), the kubelet and the add-ons' kube-proxy
// and CoreDNS. The hack scripts cache their result and lock their build,
// so a spec that needs one meanwhile waits for the build under way, and a
// warm cache makes this a few no-op script runs. The kubelet and add-on
// builds run at a lower CPU priority than the specs. Their errors are not
// reported here: the spec that needs the build reports its own.
func PrefetchBuilds(ctx context.Context) {
	PrefetchCSISidecars(ctx)
	go func() {
		<-sidecarsDone
		for _, script := range []string{"kubelet.sh", "kube-proxy.sh", "coredns.sh"} {
			if ctx.Err() != nil {
				return
			}
			_, _ = runHackScriptNiced(ctx, script)
		}
	}()
}

// CSISidecars builds (or finds in the cache) csi-provisioner and
// csi-attacher with hack/csi.sh, or waits for the build PrefetchCSISidecars
// started, and returns their directory.
func CSISidecars(ctx context.Context) (string, error) {
	PrefetchCSISidecars(context.WithoutCancel(ctx))
	select {
	case <-sidecarsDone:
		return sidecarsDir, sidecarsErr
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for the CSI sidecars' build: %w", ctx.Err())
	}
}

// StartCSIStack builds the binaries, starts the driver, the registrar and
// the sidecars, and creates the CSIDriver and the StorageClass. The
// sidecars use the admin credentials. Stop undoes it all.
func StartCSIStack(ctx context.Context, api *APIServer, opts CSIStackOptions) (_ *CSIStack, err error) {
	if opts.DriverName == "" {
		opts.DriverName = hostpath.DefaultDriverName
	}
	if opts.NodeID == "" {
		opts.NodeID = "csi-node"
	}
	if opts.StorageClass == "" {
		opts.StorageClass = "csi-hostpath"
	}
	bin, err := CSITestBinaries(ctx)
	if err != nil {
		return nil, err
	}
	sidecars, err := CSISidecars(ctx)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := api.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	admin, err := api.AdminClient()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodelet-csi-")
	if err != nil {
		return nil, fmt.Errorf("creating the CSI stack's directory: %w", err)
	}
	s := &CSIStack{
		Options:     opts,
		Dir:         dir,
		StateDir:    filepath.Join(dir, "state"),
		CallLogPath: filepath.Join(dir, "calls.jsonl"),
		admin:       admin,
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	pluginDir := opts.PluginDir
	if pluginDir == "" {
		pluginDir = filepath.Join(dir, "plugin")
	}
	regDir := opts.RegistrationDir
	if regDir == "" {
		regDir = filepath.Join(dir, "registration")
	}
	for _, d := range []string{pluginDir, regDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return s, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	s.Endpoint = filepath.Join(pluginDir, "csi.sock")
	s.RegistrationSocket = filepath.Join(regDir, registrar.SocketName(opts.DriverName))

	// The objects first: the sidecars find them when they start.
	if err := s.createObjects(ctx); err != nil {
		return s, err
	}

	driverArgs := []string{
		"--endpoint=unix://" + s.Endpoint,
		"--drivername=" + opts.DriverName,
		"--nodeid=" + opts.NodeID,
		"--statedir=" + s.StateDir,
		"--max-volumes-per-node=" + strconv.FormatInt(opts.MaxVolumesPerNode, 10),
		"--attach-required=" + strconv.FormatBool(opts.AttachRequired),
		"--call-log=" + s.CallLogPath,
		"--v=2",
	}
	driver, err := s.startProcess("csi-hostpath", filepath.Join(bin, "csi-hostpath-e2e"), driverArgs)
	if err != nil {
		return s, err
	}
	if err := waitCSIReady(ctx, driver, s.Endpoint); err != nil {
		return s, err
	}
	reg, err := s.startProcess("csi-registrar", filepath.Join(bin, "csi-registrar-e2e"), []string{
		"--csi-address=" + s.Endpoint,
		"--kubelet-registration-path=" + s.Endpoint,
		"--plugin-registration-path=" + regDir,
		"--v=2",
	})
	if err != nil {
		return s, err
	}
	if err := waitForFile(ctx, reg, s.RegistrationSocket); err != nil {
		return s, err
	}

	// Topology on, so that PVs carry the node affinity of the driver's
	// topology key; strict topology off (the default): with Immediate
	// binding there is no selected node, and the requirements come from
	// the Nodes whose CSINode lists the driver with its topology key.
	provisionerArgs := []string{
		"--csi-address=" + s.Endpoint,
		"--kubeconfig=" + kubeconfig,
		"--leader-election=false",
		"--feature-gates=Topology=" + strconv.FormatBool(!opts.NoTopology),
		"--extra-create-metadata",
		"--v=3",
	}
	if err := s.startSidecar(ctx, "csi-provisioner", filepath.Join(sidecars, "csi-provisioner"),
		append(provisionerArgs, opts.ProvisionerArgs...)); err != nil {
		return s, err
	}
	if opts.AttachRequired {
		if err := s.startSidecar(ctx, "csi-attacher", filepath.Join(sidecars, "csi-attacher"), append([]string{
			"--csi-address=" + s.Endpoint,
			"--kubeconfig=" + kubeconfig,
			"--leader-election=false",
			"--v=3",
		}, opts.AttacherArgs...)); err != nil {
			return s, err
		}
	}
	return s, nil
}

// createObjects creates the CSIDriver and the StorageClass, replacing
// ones a previous run left.
func (s *CSIStack) createObjects(ctx context.Context) error {
	o := s.Options
	driver := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: o.DriverName},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr.To(o.AttachRequired),
			PodInfoOnMount: ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{
				storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral,
			},
			FSGroupPolicy:     ptr.To(storagev1.FileFSGroupPolicy),
			TokenRequests:     o.TokenRequests,
			RequiresRepublish: ptr.To(o.RequiresRepublish),
		},
	}
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: o.StorageClass},
		Provisioner:          o.DriverName,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: ptr.To(false),
	}
	for _, obj := range []client.Object{driver, class} {
		if err := s.admin.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing a previous %T %s: %w", obj, obj.GetName(), err)
		}
		obj.SetResourceVersion("")
		if err := s.admin.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// startProcess runs bin with args, its output in Dir/logs/<name>/<name>.log.
func (s *CSIStack) startProcess(name, bin string, args []string) (*Component, error) {
	logDir := filepath.Join(s.Dir, "logs", name)
	if err := os.MkdirAll(logDir, 0o750); err != nil {
		return nil, fmt.Errorf("creating the %s log directory: %w", name, err)
	}
	c := &Component{Name: name, Dir: logDir, LogPath: filepath.Join(logDir, name+".log")}
	if err := c.start(bin, args); err != nil {
		return nil, err
	}
	s.procs = append(s.procs, c)
	return c, nil
}

// startSidecar starts a kubernetes-csi sidecar with its HTTP endpoint on
// a free port and waits until it serves /metrics, which it does once it
// has reached the driver.
func (s *CSIStack) startSidecar(ctx context.Context, name, bin string, args []string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	c, err := s.startProcess(name, bin, append(args, "--http-endpoint=127.0.0.1:"+strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return healthWait{
		name: name, url: fmt.Sprintf("http://127.0.0.1:%d/metrics", port),
		exited: c.done, exitErr: c.exitErr, logTail: c.LogTail,
	}.wait(ctx, csiStartTimeout)
}

// waitCSIReady waits until the driver answers Probe on its socket.
func waitCSIReady(ctx context.Context, c *Component, socket string) error {
	if err := waitForFile(ctx, c, socket); err != nil {
		return err
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dialing the CSI driver: %w", err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, csiStartTimeout)
	defer cancel()
	for {
		resp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
		if err == nil && resp.GetReady().GetValue() {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s exited during start-up (%w); log:\n%s", c.Name, c.exitErr(), c.LogTail(40))
		case <-ctx.Done():
			return fmt.Errorf("the CSI driver did not answer Probe (%w); log:\n%s", err, c.LogTail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitForFile waits until p exists or the process exits.
func waitForFile(ctx context.Context, c *Component, p string) error {
	ctx, cancel := context.WithTimeout(ctx, csiStartTimeout)
	defer cancel()
	for {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s exited during start-up (%w); log:\n%s", c.Name, c.exitErr(), c.LogTail(40))
		case <-ctx.Done():
			return fmt.Errorf("%s did not create %s; log:\n%s", c.Name, p, c.LogTail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// DriverName is the CSI driver's name.
func (s *CSIStack) DriverName() string { return s.Options.DriverName }

// Calls returns the calls of method the driver served, in order; all of
// them when method is empty.
func (s *CSIStack) Calls(method string) []CallRecord {
	recs, err := hostpath.ReadCallLog(s.CallLogPath)
	if err != nil {
		return nil
	}
	if method == "" {
		return recs
	}
	var out []CallRecord
	for _, r := range recs {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// VolumeDir is the directory that holds a volume's data.
func (s *CSIStack) VolumeDir(volumeID string) string {
	return filepath.Join(s.StateDir, volumeID)
}

// LogTail returns the last lines of each process's log.
func (s *CSIStack) LogTail(lines int) string {
	var b strings.Builder
	for _, c := range s.procs {
		fmt.Fprintf(&b, "--- %s (%s):\n%s\n", c.Name, c.LogPath, c.LogTail(lines))
	}
	return b.String()
}

// Stop ends the processes (the sidecars first, the driver last), deletes
// the StorageClass and the CSIDriver, unmounts whatever is left under the
// stack's directory and removes it. Safe to call twice.
func (s *CSIStack) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	var errs []error
	for i := len(s.procs) - 1; i >= 0; i-- {
		errs = append(errs, s.procs[i].Stop())
	}
	if s.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, obj := range []client.Object{
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: s.Options.StorageClass}},
			&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: s.Options.DriverName}},
		} {
			if err := s.admin.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err))
			}
		}
	}
	if err := unmountUnder(s.Dir); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(s.Dir); err != nil {
		errs = append(errs, fmt.Errorf("removing the CSI stack's directory: %w", err))
	}
	return errors.Join(errs...)
}

// MustStartCSIStack starts a CSI stack for the enclosing container or
// spec, fails it when that does not work, stops it in DeferCleanup, and
// prints the end of its logs next to a failed spec.
func MustStartCSIStack(ctx context.Context, api *APIServer, opts CSIStackOptions) *CSIStack {
	GinkgoHelper()
	s, err := StartCSIStack(ctx, api, opts)
	Expect(err).NotTo(HaveOccurred(), "starting the CSI stack")
	DeferCleanup(s.Stop)
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("CSI stack logs:\n%s\n", s.LogTail(60))
		}
	})
	return s
}
