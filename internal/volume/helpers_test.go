package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/mount-utils"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeFetcher serves ConfigMaps and Secrets from maps keyed by name and
// counts token requests.
type fakeFetcher struct {
	mu sync.Mutex
	// pcrs are the PodCertificateRequests created, by name; sign, when
	// set, answers each as it is created (or later, through pcrs).
	pcrs       map[string]*certificatesv1.PodCertificateRequest
	pcrList    []*certificatesv1.PodCertificateRequest
	sign       func(*certificatesv1.PodCertificateRequest)
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	claims     map[string]*v1.PersistentVolumeClaim
	pvs        map[string]*v1.PersistentVolume
	bundles    []certificatesv1.ClusterTrustBundle
	tokenCalls []tokenCall
	tokenErr   error
	// clock, when set, stamps tokens with an expiry; maxTokenSeconds
	// caps it as an API server's maximum token lifetime does.
	clock           clock.PassiveClock
	maxTokenSeconds int64
}

type tokenCall struct {
	audience   string
	expiration int64
}

func newFakeFetcher() *fakeFetcher {
	return &fakeFetcher{configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
}

func (f *fakeFetcher) ConfigMap(_ context.Context, _, name string) (*v1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cm, ok := f.configMaps[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f *fakeFetcher) Secret(_ context.Context, _, name string) (*v1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f *fakeFetcher) PersistentVolumeClaim(_ context.Context, ns, name string) (*v1.PersistentVolumeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.claims[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (f *fakeFetcher) PersistentVolume(_ context.Context, name string) (*v1.PersistentVolume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pv, ok := f.pvs[name]; ok {
		return pv, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

func (f *fakeFetcher) ClusterTrustBundle(_ context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.bundles {
		if f.bundles[i].Name == name {
			return &f.bundles[i], nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "certificates.k8s.io", Resource: "clustertrustbundles"}, name)
}

func (f *fakeFetcher) ClusterTrustBundles(_ context.Context, signer string) ([]certificatesv1.ClusterTrustBundle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []certificatesv1.ClusterTrustBundle
	for _, b := range f.bundles {
		if b.Spec.SignerName == signer {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *fakeFetcher) CreatePodCertificateRequest(_ context.Context, req *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pcrs == nil {
		f.pcrs = map[string]*certificatesv1.PodCertificateRequest{}
	}
	r := req.DeepCopy()
	r.Name = fmt.Sprintf("%s%d", r.GenerateName, len(f.pcrList))
	if f.sign != nil {
		f.sign(r)
	}
	f.pcrs[r.Name] = r
	f.pcrList = append(f.pcrList, r)
	return r.DeepCopy(), nil
}

func (f *fakeFetcher) PodCertificateRequest(_ context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.pcrs[name]; ok && r.Namespace == namespace {
		return r.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}, name)
}

func (f *fakeFetcher) setClaim(c *v1.PersistentVolumeClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claims == nil {
		f.claims = map[string]*v1.PersistentVolumeClaim{}
	}
	f.claims[c.Namespace+"/"+c.Name] = c
}

func (f *fakeFetcher) setPV(pv *v1.PersistentVolume) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pvs == nil {
		f.pvs = map[string]*v1.PersistentVolume{}
	}
	f.pvs[pv.Name] = pv
}

func (f *fakeFetcher) ServiceAccountToken(_ context.Context, _ *v1.Pod, audience string, expiration int64) (authenticationv1.TokenRequestStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tokenErr != nil {
		return authenticationv1.TokenRequestStatus{}, f.tokenErr
	}
	f.tokenCalls = append(f.tokenCalls, tokenCall{audience, expiration})
	st := authenticationv1.TokenRequestStatus{Token: "token-" + audience + "-" + string(rune('0'+len(f.tokenCalls)))}
	if f.maxTokenSeconds > 0 && expiration > f.maxTokenSeconds {
		expiration = f.maxTokenSeconds
	}
	if f.clock != nil {
		st.ExpirationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Duration(expiration) * time.Second))
	}
	return st, nil
}

func (f *fakeFetcher) setConfigMap(name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configMaps[name] = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: data}
}

func (f *fakeFetcher) setSecret(name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	f.secrets[name] = s
}

type testEnv struct {
	m       *Manager
	f       *fakeFetcher
	clock   *clocktesting.FakeClock
	mounter *mount.FakeMounter
	root    string
}

// newTestEnv returns a Manager in a temporary root with a fake mounter, so
// tests run without mounting anything.
func newTestEnv(t *testing.T, opts ...Option) *testEnv {
	t.Helper()
	e := &testEnv{
		f:       newFakeFetcher(),
		clock:   clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
		mounter: mount.NewFakeMounter(nil),
		root:    t.TempDir(),
	}
	e.f.clock = e.clock
	all := append([]Option{WithClock(e.clock), WithMounter(e.mounter)}, opts...)
	m, err := New(e.root, e.f, all...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.m = m
	return e
}

func testPod(volumes ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "a \"quoted\" value"},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c"}},
			Volumes:    volumes,
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return string(b)
}

func assertMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	if got := info.Mode() & (fs.ModePerm | fs.ModeSetgid); got != want {
		t.Errorf("mode of %s = %#o, want %#o", path, got, want)
	}
}

// volumeFiles lists the user-visible regular files of a volume, following
// links, relative to dir.
func volumeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	for _, e := range entries {
		if e.Name()[0] == '.' && len(e.Name()) > 1 && e.Name()[1] == '.' {
			continue
		}
		collect(t, dir, e.Name(), files)
	}
	return files
}

func collect(t *testing.T, dir, rel string, files map[string]string) {
	t.Helper()
	path := filepath.Join(dir, rel)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	if !info.IsDir() {
		files[filepath.ToSlash(rel)] = readFile(t, path)
		return
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		t.Fatalf("listing %s: %v", path, err)
	}
	for _, e := range entries {
		collect(t, dir, filepath.Join(rel, e.Name()), files)
	}
}

func setUpErrorFor(t *testing.T, err error, volume string) *SetUpError {
	t.Helper()
	var se *SetUpError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *SetUpError", err)
	}
	if se.Volume != volume {
		t.Fatalf("SetUpError.Volume = %q, want %q", se.Volume, volume)
	}
	return se
}

// assertGroup checks the group of path when the test can change groups.
func assertGroup(t *testing.T, path string, gid uint32) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	if got := info.Sys().(*syscall.Stat_t).Gid; got != gid {
		t.Errorf("group of %s = %d, want %d", path, got, gid)
	}
}

// requireRoot skips tests that mount: they need CAP_SYS_ADMIN, which CI has.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount")
	}
}
