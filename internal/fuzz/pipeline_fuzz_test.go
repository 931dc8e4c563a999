package fuzz

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/mount-utils"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/kuberuntime/criconfig"
	"github.com/nodelet/nodelet/internal/kuberuntime/planner"
	"github.com/nodelet/nodelet/internal/kuberuntime/state"
	"github.com/nodelet/nodelet/internal/kuberuntime/status"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/volume"
)

// gen turns fuzz bytes into choices; when the bytes run out every choice is
// the first option.
type gen struct{ data []byte }

func (g *gen) next() byte {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return b
}

func (g *gen) intn(n int) int              { return int(g.next()) % n }
func (g *gen) bool() bool                  { return g.next()&1 == 1 }
func pick[T any](g *gen, options []T) T    { return options[g.intn(len(options))] }
func (g *gen) maybe(s string) string       { return pick(g, []string{"", s}) }
func (g *gen) int64p(vals ...int64) *int64 { return pick(g, append([]*int64{nil}, ptrs(vals)...)) }

func ptrs(vals []int64) []*int64 {
	out := make([]*int64, len(vals))
	for i := range vals {
		out[i] = &vals[i]
	}
	return out
}

// Strings the API accepts in each place, chosen to reach edge cases.
var (
	subPaths      = []string{"", "a", "a/b", "x/y/z", "key", "dir/", "..data", "a//b", "with space"}
	keyPaths      = []string{"key", "a/key", "deep/er/key", "..x", "k"}
	mountPaths    = []string{"/data", "/etc/app", "/dev/termination-log", "/etc/hosts", "/data/sub", "/"}
	linkTargets   = []string{"/", "/etc", "..", "../../..", "a", "/proc/self/root"}
	linkNames     = []string{"a", "x", "dir", "key"}
	seccompPaths  = []string{"p.json", "sub/p.json", "", "x/../p.json"}
	sysctlNames   = []string{"kernel.shm_rmid_forced", "kernel.msgmax", "net.ipv4.ip_local_port_range", "kernel.sem", "vm.swappiness"}
	fieldPaths    = []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations", "metadata.labels['a']", "spec.nodeName", "status.podIP", "status.hostIPs"}
	resourceNames = []string{"limits.cpu", "requests.memory", "limits.ephemeral-storage"}
)

// Values of subPathExpr: they reference S, whose value is one of
// subPathValues (a ConfigMap or the downward API could hold any of them),
// F, a downward API field, and variables that are not set.
var (
	subPathExprs  = []string{"$(S)", "$(S)/x", "a/$(S)", "$(S)$(S)", "$(F)", "$(F)/$(S)", "$$(S)", "$(S", "$(MISSING)", "$(S)/$(MISSING)", "$()"}
	subPathValues = []string{"a", "a/b", "key", "..", "../..", "a/../..", "/", "/etc", ".", "..data", "x/..", "dir/", ""}
)

// fakeFetcher serves every ConfigMap and Secret with the same keys.
type fakeFetcher struct{}

func (fakeFetcher) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string]string{"key": "v", "a": "1", "k": "2"}}, nil
}

func (fakeFetcher) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{"key": []byte("s"), "a": []byte("1")}}, nil
}

func (fakeFetcher) PersistentVolumeClaim(_ context.Context, _, name string) (*v1.PersistentVolumeClaim, error) {
	return nil, apierrors.NewNotFound(v1.Resource("persistentvolumeclaims"), name)
}

func (fakeFetcher) PersistentVolume(_ context.Context, name string) (*v1.PersistentVolume, error) {
	return nil, apierrors.NewNotFound(v1.Resource("persistentvolumes"), name)
}

func (fakeFetcher) ClusterTrustBundle(_ context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	return nil, apierrors.NewNotFound(certificatesv1.Resource("clustertrustbundles"), name)
}

func (fakeFetcher) ClusterTrustBundles(context.Context, string) ([]certificatesv1.ClusterTrustBundle, error) {
	return nil, nil
}

func (fakeFetcher) CreatePodCertificateRequest(context.Context, *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	return nil, errors.New("no signer")
}

func (fakeFetcher) PodCertificateRequest(context.Context, string, string) (*certificatesv1.PodCertificateRequest, error) {
	return nil, errors.New("no signer")
}

func (fakeFetcher) ServiceAccountToken(context.Context, *v1.Pod, string, int64) (authenticationv1.TokenRequestStatus, error) {
	return authenticationv1.TokenRequestStatus{Token: "token"}, nil
}

func (g *gen) keyItems() []v1.KeyToPath {
	var items []v1.KeyToPath
	for range g.intn(3) {
		items = append(items, v1.KeyToPath{Key: pick(g, []string{"key", "a", "missing"}), Path: pick(g, keyPaths),
			Mode: pick(g, []*int32{nil, ptr.To[int32](0o400), ptr.To[int32](0o777)})})
	}
	return items
}

func (g *gen) volume(i int, hostDir string) v1.Volume {
	name := fmt.Sprintf("v%d", i)
	var src v1.VolumeSource
	switch g.intn(7) {
	case 0, 1:
		src.EmptyDir = &v1.EmptyDirVolumeSource{}
		if g.intn(4) == 0 {
			src.EmptyDir.Medium = v1.StorageMediumMemory
			src.EmptyDir.SizeLimit = ptr.To(resource.MustParse("1Mi"))
		}
	case 2:
		src.HostPath = &v1.HostPathVolumeSource{Path: filepath.Join(hostDir, pick(g, []string{"", "sub"})),
			Type: pick(g, []*v1.HostPathType{nil, ptr.To(v1.HostPathDirectoryOrCreate), ptr.To(v1.HostPathDirectory)})}
	case 3:
		src.ConfigMap = &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"},
			Items: g.keyItems(), Optional: ptr.To(g.bool())}
	case 4:
		src.Secret = &v1.SecretVolumeSource{SecretName: "s", Items: g.keyItems(), DefaultMode: ptr.To[int32](0o644)}
	case 5:
		var items []v1.DownwardAPIVolumeFile
		for range g.intn(3) {
			f := v1.DownwardAPIVolumeFile{Path: pick(g, keyPaths)}
			if g.bool() {
				f.FieldRef = &v1.ObjectFieldSelector{FieldPath: pick(g, fieldPaths)}
			} else {
				f.ResourceFieldRef = &v1.ResourceFieldSelector{ContainerName: "c0", Resource: pick(g, resourceNames)}
			}
			items = append(items, f)
		}
		src.DownwardAPI = &v1.DownwardAPIVolumeSource{Items: items}
	default:
		src.Projected = &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: g.keyItems()}},
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: pick(g, keyPaths), ExpirationSeconds: ptr.To[int64](3600)}},
		}}
	}
	return v1.Volume{Name: name, VolumeSource: src}
}

func (g *gen) container(name string, volumes int) v1.Container {
	c := v1.Container{Name: name, Image: "busybox", Command: []string{"sh"},
		TerminationMessagePath: pick(g, []string{"", "/dev/termination-log", "/tmp/msg"})}
	for range g.intn(4) {
		vm := v1.VolumeMount{Name: fmt.Sprintf("v%d", g.intn(volumes+1)), MountPath: pick(g, mountPaths),
			SubPath: pick(g, subPaths), ReadOnly: g.bool()}
		if g.intn(4) == 0 {
			vm.MountPropagation = pick(g, []*v1.MountPropagationMode{ptr.To(v1.MountPropagationNone), ptr.To(v1.MountPropagationHostToContainer)})
		}
		c.VolumeMounts = append(c.VolumeMounts, vm)
	}
	if g.bool() {
		c.SecurityContext = &v1.SecurityContext{
			RunAsUser: g.int64p(0, 1000), RunAsGroup: g.int64p(0, 3000), RunAsNonRoot: pick(g, []*bool{nil, ptr.To(true), ptr.To(false)}),
			Privileged: pick(g, []*bool{nil, ptr.To(true)}), ReadOnlyRootFilesystem: pick(g, []*bool{nil, ptr.To(true)}),
		}
		switch g.intn(4) {
		case 1:
			c.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(pick(g, seccompPaths))}
		case 2:
			c.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("p")}
		case 3:
			c.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}
		}
	}
	if g.bool() {
		c.Ports = []v1.ContainerPort{{ContainerPort: int32(g.intn(3) + 80), HostPort: int32(g.intn(2) * 8080),
			Protocol: pick(g, []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP}), HostIP: g.maybe("10.0.0.1")}}
	}
	if g.bool() {
		c.Env = []v1.EnvVar{
			{Name: "A", Value: "$(B)x$$(C)"},
			{Name: "F", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: pick(g, fieldPaths)}}},
			{Name: "K", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: pick(g, []string{"key", "missing"}), Optional: ptr.To(g.bool())}}},
		}
	}
	if g.bool() {
		c.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(pick(g, []string{"100m", "2"})),
			v1.ResourceMemory: resource.MustParse(pick(g, []string{"64Mi", "1Gi"}))}
	}
	if g.bool() {
		c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: pick(g, []intstr.IntOrString{intstr.FromInt(80), intstr.FromString("http"), intstr.FromString("none")})}}}
		c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 1}}}
	}
	return c
}

func (g *gen) pod(hostDir string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pick(g, []string{"p", strings.Repeat("long", 60)}), Namespace: "ns", UID: "uid-fuzz",
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{}},
		Spec: v1.PodSpec{NodeName: "node", RestartPolicy: pick(g, []v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever}),
			HostNetwork: g.intn(4) == 0, ActiveDeadlineSeconds: g.int64p(1), TerminationGracePeriodSeconds: g.int64p(0, 30)},
	}
	if g.intn(4) == 0 {
		pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"c0"] = pick(g, []string{"runtime/default", "unconfined", "localhost/x"})
	}
	if g.bool() {
		pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: g.int64p(2000), SupplementalGroups: []int64{4000},
			RunAsUser: g.int64p(0, 1000), FSGroupChangePolicy: pick(g, []*v1.PodFSGroupChangePolicy{nil, ptr.To(v1.FSGroupChangeOnRootMismatch)})}
		if g.bool() {
			pod.Spec.SecurityContext.Sysctls = []v1.Sysctl{{Name: pick(g, sysctlNames), Value: "1"}}
		}
	}
	volumes := g.intn(5)
	for i := range volumes {
		pod.Spec.Volumes = append(pod.Spec.Volumes, g.volume(i, hostDir))
	}
	for i := range g.intn(3) {
		ic := g.container(fmt.Sprintf("i%d", i), volumes)
		if g.intn(3) == 0 {
			ic.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, ic)
	}
	for i := range 1 + g.intn(3) {
		pod.Spec.Containers = append(pod.Spec.Containers, g.container(fmt.Sprintf("c%d", i), volumes))
	}
	for i := range pod.Spec.InitContainers {
		g.subPathExprs(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		g.subPathExprs(&pod.Spec.Containers[i])
	}
	g.isolation(pod)
	return pod
}

// isolation has the pod ask for a user namespace, a RuntimeClass or the
// Strict supplemental groups policy. It draws last, and the choice when
// the bytes have run out asks for none, so older seeds make the same pod.
func (g *gen) isolation(pod *v1.Pod) {
	pod.Spec.HostUsers = pick(g, []*bool{nil, ptr.To(false), ptr.To(true)})
	pod.Spec.RuntimeClassName = pick(g, []*string{nil, ptr.To("sandboxed")})
	if p := pick(g, []*v1.SupplementalGroupsPolicy{nil, ptr.To(v1.SupplementalGroupsPolicyStrict), ptr.To(v1.SupplementalGroupsPolicyMerge)}); p != nil {
		if pod.Spec.SecurityContext == nil {
			pod.Spec.SecurityContext = &v1.PodSecurityContext{}
		}
		pod.Spec.SecurityContext.SupplementalGroupsPolicy = p
	}
}

// subPathExprs turns some of c's volumeMounts into subPathExpr mounts and
// gives S, the variable they use most, a value where c has an environment.
// It draws after the rest of the pod, and the choice when the bytes have
// run out changes nothing, so a seed written for the pod before subPathExpr
// was fuzzed still makes the same pod.
func (g *gen) subPathExprs(c *v1.Container) {
	exprs := false
	for i := range c.VolumeMounts {
		if g.intn(3) == 1 {
			c.VolumeMounts[i].SubPath, c.VolumeMounts[i].SubPathExpr = "", pick(g, subPathExprs)
			exprs = true
		}
	}
	if exprs && len(c.Env) > 0 {
		c.Env = append(c.Env, v1.EnvVar{Name: "S", Value: pick(g, subPathValues)})
	}
}

// link is a symbolic link a container could make in an emptyDir.
type link struct{ volume, name, target string }

// links chooses, from the first bytes, the links to plant, so that they do
// not depend on bytes the pod may have used up.
func (g *gen) links() []link {
	var out []link
	for range g.intn(3) {
		out = append(out, link{volume: fmt.Sprintf("v%d", g.intn(4)), name: pick(g, linkNames), target: pick(g, linkTargets)})
	}
	return out
}

// plantLinks makes the links in the pod's emptyDirs that exist.
func plantLinks(t *testing.T, m *volume.Manager, pod *v1.Pod, links []link) {
	for _, l := range links {
		dir := filepath.Join(m.PodDir(pod.UID), "volumes", "kubernetes.io~empty-dir", l.volume)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if err := os.Symlink(l.target, filepath.Join(dir, l.name)); err != nil && !errors.Is(err, os.ErrExist) {
			t.Fatalf("planting a link: %v", err)
		}
	}
}

func FuzzPodPipeline(f *testing.F) {
	if os.Geteuid() != 0 {
		f.Skip("subPath mounts need root")
	}
	for _, seed := range pipelineSeeds() {
		f.Add(seed)
	}
	f.Fuzz(checkPipeline)
}

// pipelineSeeds are FuzzPodPipeline's seed corpus.
func pipelineSeeds() [][]byte {
	return [][]byte{
		{},
		// A link "a" to the host root in v0, an emptyDir mounted with
		// subPath "a".
		{0x1, 0x0, 0x0, 0x6, 0x3, 0x0, 0x1, 0x5, 0x5, 0x6, 0x3, 0x7, 0x6, 0x5, 0x6, 0x6, 0x1, 0x5,
			0x3, 0x2, 0x0, 0x1, 0x2, 0x6, 0x1, 0x7, 0x4, 0x1, 0x6, 0x1, 0x6, 0x5, 0x2, 0x3, 0x4, 0x3},
		{4, 0, 1, 1, 1, 0, 2, 0, 1, 1, 1, 1, 1},
		{1, 2, 0, 0, 0, 0, 1, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1, 1},
		[]byte("subPath through a planted link to the host root"),
		{3, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
	}
}

// checkPipeline builds a pod and planted links from data and runs them
// through the pipeline.
func checkPipeline(t *testing.T, data []byte) {
	g := &gen{data: data}
	links := g.links()
	hostDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(hostDir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	pod := g.pod(hostDir)
	runPipeline(t, g, pod, links)
}

func runPipeline(t *testing.T, g *gen, pod *v1.Pod, links []link) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node"}, Status: v1.NodeStatus{
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("110")}}}
	_ = admission.Policy{AppArmor: admission.AppArmor{Loaded: map[string]bool{"p": true}}}.Admit(pod, node, nil)
	checkIsolationAdmission(t, pod, node)
	userns := checkUserNamespace(t, g, pod)

	root := t.TempDir()
	m, err := volume.New(root, fakeFetcher{}, volume.WithMounter(mount.NewFakeMounter(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.TearDown(ctx, pod.UID); err != nil {
			t.Fatalf("TearDown: %v", err)
		}
	}()
	st := state.NewPodState(pod.UID)
	actions := planner.ComputePodActions(pod, state.PodRuntime{}, st, planner.Inputs{Now: now})
	sbCfg, err := criconfig.SandboxConfig(pod, criconfig.SandboxOptions{PodLogsDir: filepath.Join(root, "logs"), ClusterDomain: "cluster.local", UserNamespace: userns})
	if err == nil && !strings.HasPrefix(sbCfg.LogDirectory, filepath.Join(root, "logs")+"/") {
		t.Fatalf("log directory %s outside the logs root", sbCfg.LogDirectory)
	}
	if err == nil && !proto.Equal(sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(), userns) {
		t.Fatalf("sandbox user namespace %v, want %v", sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(), userns)
	}
	_ = m.SetUp(ctx, pod)
	plantLinks(t, m, pod, links)

	rt := state.PodRuntime{Sandboxes: []state.Sandbox{{ID: "sb", Ready: true, IPs: []string{"10.0.0.2"}, CreatedAt: now}}}
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	envs := map[string][]criconfig.EnvVar{}
	for i := range all {
		c := &all[i]
		opts := criconfig.ContainerOptions{SandboxID: "sb",
			PodIPs: []string{"10.0.0.2"}, HostIPs: []string{"10.0.0.1"}, SeccompRoot: filepath.Join(root, "seccomp"),
			ConfigMaps: map[string]*v1.ConfigMap{}, NodeAllocatable: node.Status.Allocatable, UserNamespace: userns}
		if opts.Env, err = criconfig.ContainerEnv(pod, c, opts); err != nil {
			continue
		}
		envs[c.Name] = opts.Env
		if opts.Mounts, err = m.Mounts(pod, c, 0, opts.Env, nil); err != nil {
			continue
		}
		checkMounts(t, m, pod, envs, opts.Mounts)
		cfg, err := criconfig.ContainerConfig(pod, c, opts)
		if err != nil {
			continue
		}
		checkMounts(t, m, pod, envs, cfg.Mounts)
		checkIDMappedMounts(t, userns, cfg)
		if sp := cfg.GetLinux().GetSecurityContext().GetSeccomp(); sp.GetProfileType() == runtimeapi.SecurityProfile_Localhost &&
			!strings.HasPrefix(sp.LocalhostRef, filepath.Join(root, "seccomp")+"/") {
			t.Fatalf("seccomp profile %s outside the profile root", sp.LocalhostRef)
		}
		rt.Containers = append(rt.Containers, state.Container{ID: fmt.Sprintf("id%d", i), Name: c.Name, SandboxID: "sb",
			State:    pick(g, []state.ContainerState{state.ContainerRunning, state.ContainerExited}),
			ExitCode: int32(g.intn(2)), StartedAt: now, FinishedAt: now.Add(time.Second), Hash: podspec.ContainerHash(c)})
	}
	for _, s := range actions.ContainersToStart {
		st.RecordStart(s.Name, s.RestartCount, s.PrevFinishedAt, s.MaxCrashLoopBackOff, now)
	}
	later := now.Add(time.Minute)
	_ = planner.ComputePodActions(pod, rt, st, planner.Inputs{Now: later})
	_ = status.ComputePodStatus(pod, rt, st, status.Inputs{Now: later, HostIPs: []string{"10.0.0.1"}})
	pod.DeletionTimestamp = &metav1.Time{Time: later}
	_ = planner.PlanTermination(pod, rt, st, later)
}

// checkMounts fails the test when a mount shows anything outside the pod's
// directory or a declared hostPath. A subPath target is a bind mount of
// something inside a volume: its identity (device and inode) must be that
// of the subPath (a subPathExpr expanded with the container's environment
// in envs) resolved inside the volume.
func checkMounts(t *testing.T, m *volume.Manager, pod *v1.Pod, envs map[string][]criconfig.EnvVar, mounts []*runtimeapi.Mount) {
	t.Helper()
	podDir := m.PodDir(pod.UID)
	for _, mnt := range mounts {
		if within(mnt.HostPath, filepath.Join(podDir, "volume-subpaths")) {
			checkSubPathTarget(t, podDir, pod, envs, mnt.HostPath)
			continue
		}
		if within(mnt.HostPath, podDir) {
			continue
		}
		if !declaredHostPath(pod, mnt.HostPath) {
			t.Fatalf("mount source %s is neither in the pod directory %s nor a declared hostPath", mnt.HostPath, podDir)
		}
	}
}

func checkSubPathTarget(t *testing.T, podDir string, pod *v1.Pod, envs map[string][]criconfig.EnvVar, target string) {
	t.Helper()
	rel, _ := filepath.Rel(filepath.Join(podDir, "volume-subpaths"), target)
	parts := strings.Split(rel, string(filepath.Separator)) // volume, container, index
	var got syscall.Stat_t
	if err := syscall.Stat(target, &got); err != nil {
		t.Fatalf("stat %s: %v", target, err)
	}
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name != parts[1] {
			continue
		}
		var idx int
		fmt.Sscan(parts[2], &idx) //nolint:errcheck // the index is ours.
		vm := c.VolumeMounts[idx]
		subPath := vm.SubPath
		if vm.SubPathExpr != "" {
			var err error
			if subPath, err = criconfig.ExpandSubPathExpr(vm.SubPathExpr, envs[c.Name]); err != nil {
				t.Fatalf("subPathExpr %q of volume %s was mounted although it does not expand: %v", vm.SubPathExpr, vm.Name, err)
			}
		}
		if filepath.IsAbs(subPath) || slices.Contains(strings.Split(subPath, "/"), "..") {
			t.Fatalf("subPath %q (%q) of volume %s was mounted although it is absolute or has '..'", subPath, vm.SubPathExpr, vm.Name)
		}
		volRoot := volumeRoot(podDir, pod, vm.Name)
		resolvedRoot, err := filepath.EvalSymlinks(volRoot)
		if err != nil {
			t.Fatal(err)
		}
		want, err := filepath.EvalSymlinks(filepath.Join(resolvedRoot, subPath))
		if err != nil || !within(want, resolvedRoot) {
			t.Fatalf("subPath %q of volume %s was mounted although it resolves to %q (%v)", subPath, vm.Name, want, err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(want, &st); err != nil {
			t.Fatal(err)
		}
		if st.Dev != got.Dev || st.Ino != got.Ino {
			t.Fatalf("subPath %q of volume %s: the mount shows another file than %s", subPath, vm.Name, want)
		}
		return
	}
	t.Fatalf("subPath target %s names no container of the pod", target)
}

func volumeRoot(podDir string, pod *v1.Pod, name string) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		switch {
		case v.HostPath != nil:
			return v.HostPath.Path
		case v.EmptyDir != nil:
			return filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", name)
		case v.ConfigMap != nil:
			return filepath.Join(podDir, "volumes", "kubernetes.io~configmap", name)
		case v.Secret != nil:
			return filepath.Join(podDir, "volumes", "kubernetes.io~secret", name)
		case v.DownwardAPI != nil:
			return filepath.Join(podDir, "volumes", "kubernetes.io~downward-api", name)
		case v.Projected != nil:
			return filepath.Join(podDir, "volumes", "kubernetes.io~projected", name)
		}
	}
	return "/nonexistent"
}

func declaredHostPath(pod *v1.Pod, path string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil && within(path, v.HostPath.Path) {
			return true
		}
	}
	return false
}

func within(path, base string) bool {
	return path == base || strings.HasPrefix(path, strings.TrimSuffix(base, "/")+"/")
}

// TestLinkToTheHostIsNotMounted is the attack the fuzz target hunts for,
// spelt out: an emptyDir with a link to the host's root, mounted with the
// link as subPath, directly and as a parent, literally and as a
// subPathExpr.
func TestLinkToTheHostIsNotMounted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("subPath mounts need root")
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-link"},
		Spec: v1.PodSpec{
			Volumes: []v1.Volume{{Name: "v0", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Containers: []v1.Container{{Name: "c0", Image: "busybox", VolumeMounts: []v1.VolumeMount{
				{Name: "v0", MountPath: "/a", SubPath: "a"},
				{Name: "v0", MountPath: "/b", SubPath: "a/etc"},
				{Name: "v0", MountPath: "/c", SubPathExpr: "$(L)"},
				{Name: "v0", MountPath: "/d", SubPathExpr: "$(L)/etc"},
			}}},
		},
	}
	m, err := volume.New(t.TempDir(), fakeFetcher{}, volume.WithMounter(mount.NewFakeMounter(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.TearDown(context.Background(), pod.UID); err != nil {
			t.Errorf("TearDown: %v", err)
		}
	})
	plantLinks(t, m, pod, []link{{volume: "v0", name: "a", target: "/"}})
	envs := map[string][]criconfig.EnvVar{"c0": {{Name: "L", Value: "a"}}}
	for i, vm := range pod.Spec.Containers[0].VolumeMounts {
		c := pod.Spec.Containers[0]
		c.VolumeMounts = []v1.VolumeMount{vm}
		mounts, err := m.Mounts(pod, &c, 0, envs["c0"], nil)
		if err == nil {
			checkMounts(t, m, pod, envs, mounts)
			t.Fatalf("mount %d: subPath %q%s through a link to / was mounted", i, vm.SubPath, vm.SubPathExpr)
		}
		if !strings.Contains(err.Error(), "resolves outside the volume") {
			t.Errorf("mount %d: error %v, want it to say the subPath leaves the volume", i, err)
		}
	}
}

// checkIsolationAdmission fails the test when admission lets a pod asking
// for the Strict supplemental groups policy onto a runtime without it, or
// refuses one for it on a runtime that has it.
func checkIsolationAdmission(t *testing.T, pod *v1.Pod, node *v1.Node) {
	t.Helper()
	strict := pod.Spec.SecurityContext != nil && ptr.Deref(pod.Spec.SecurityContext.SupplementalGroupsPolicy, "") == v1.SupplementalGroupsPolicyStrict
	without := admission.Policy{}.Admit(pod, node, nil)
	if strict && without.Admit {
		t.Fatal("a pod asking for supplementalGroupsPolicy Strict was admitted on a runtime without it")
	}
	with := admission.Policy{Runtime: admission.RuntimeFeatures{SupplementalGroupsPolicy: true}}.Admit(pod, node, nil)
	if with.Reason == admission.ReasonSupplementalGroupsPolicyNotSupported {
		t.Fatal("a runtime with supplementalGroupsPolicy refused a pod for it")
	}
}

// checkUserNamespace fails the test when a pod asking for a user namespace
// would run without one: it must be refused on a runtime without them,
// and get a user namespace of its own (mode POD) where it is not refused.
// It returns the user namespace the pod's configs get.
func checkUserNamespace(t *testing.T, g *gen, pod *v1.Pod) *runtimeapi.UserNamespace {
	t.Helper()
	handler := ""
	if pod.Spec.RuntimeClassName != nil {
		handler = "runc"
	}
	wants := pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
	if err := criconfig.CheckUserNamespace(pod, handler, criconfig.UserNamespaceSupport{}); wants && err == nil {
		t.Fatal("a pod with hostUsers: false passed on a runtime without user namespaces")
	}
	err := criconfig.CheckUserNamespace(pod, handler, criconfig.UserNamespaceSupport{Handler: true, HostNetwork: g.bool()})
	userns := criconfig.UserNamespaceOptions(pod, criconfig.IDRange{First: 65536, Length: 65536})
	if err == nil && wants != (userns.GetMode() == runtimeapi.NamespaceMode_POD) {
		t.Fatalf("hostUsers %v got user namespace mode %v", pod.Spec.HostUsers, userns.GetMode())
	}
	return userns
}

// checkIDMappedMounts fails the test when a container of a pod with its own
// user namespace has a mount whose owners are not mapped into it, or is
// not in that user namespace.
func checkIDMappedMounts(t *testing.T, userns *runtimeapi.UserNamespace, cfg *runtimeapi.ContainerConfig) {
	t.Helper()
	if got := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(); !proto.Equal(got, userns) {
		t.Fatalf("container user namespace %v, want the pod's %v", got, userns)
	}
	if userns.GetMode() != runtimeapi.NamespaceMode_POD {
		return
	}
	for _, mnt := range cfg.Mounts {
		if len(mnt.UidMappings) != 1 || !proto.Equal(mnt.UidMappings[0], userns.Uids[0]) || len(mnt.GidMappings) != 1 || !proto.Equal(mnt.GidMappings[0], userns.Gids[0]) {
			t.Fatalf("mount %s of a pod with a user namespace is not idmapped: %v %v", mnt.ContainerPath, mnt.UidMappings, mnt.GidMappings)
		}
	}
}
